package main

import (
	"fmt"
	"math"
	"time"

	"github.com/turnstilelock/turnstile"
)

// demand is what a load asks of a lock store, worked out once so that
// the row, the sizing and the sentences all use the same figures.
type demand struct {
	rate float64 // acquisitions per second
	// renewalsPerAcq is how many times the watchdog renews a lease held
	// for the average hold (every third of turnstile.DefaultTTL).
	renewalsPerAcq float64
	// requests is acquisitions and renewals per second: what a lock store
	// with a watchdog serves. A renewal is counted as an acquisition, an
	// upper bound.
	requests float64
	hot      float64 // acquisitions per second of the hottest key
	hotLimit float64 // the most times a second one key can be locked
	// hotTooHot: the hottest key needs more than headroom of hotLimit,
	// and a lock on it would queue without end.
	hotTooHot bool
}

// renewEvery is how often the watchdog renews a lease of the default TTL.
const renewEvery = turnstile.DefaultTTL / 3

func newDemand(in *adviseInput, c cost) demand {
	d := demand{rate: in.Rate, hot: in.Rate * in.HotKeyShare, hotLimit: c.hotKeyLimit(in.HoldMicros)}
	if in.hold > renewEvery {
		d.renewalsPerAcq = in.hold.Seconds() / renewEvery.Seconds()
	}
	d.requests = d.rate * (1 + d.renewalsPerAcq)
	d.hotTooHot = in.HotKeyShare > 0 && d.hot > headroom*d.hotLimit
	return d
}

// renewals is the watchdog's renewals per second.
func (d demand) renewals() float64 { return d.rate * d.renewalsPerAcq }

// hotRequests is the requests per second of the hottest key.
func (d demand) hotRequests() float64 { return d.hot * (1 + d.renewalsPerAcq) }

// describe says what the store serves: "800 acquisitions/s", or with
// renewals "30 acquisitions/s and 10,800 renewals/s (holds of 1h0m0s,
// renewed every 10s): 10,830 lock requests/s".
func (d demand) describe(hold time.Duration) string {
	if d.renewalsPerAcq == 0 {
		return fmtRate(d.rate) + " acquisitions/s"
	}
	return fmt.Sprintf("%s acquisitions/s and %s renewals/s (holds of %v, renewed every %v): %s lock requests/s",
		fmtRate(d.rate), fmtRate(d.renewals()), hold, renewEvery, fmtRate(d.requests))
}

// partition is how many groups (Redlocks, Redis Cluster masters) carry
// load requests per second, each carrying at most per, when the keys are
// spread between them and one of them also holds the hottest key's hot
// requests: that busiest group carries hot plus its share of the rest.
// It returns the groups and the busiest group's load; when even the
// hottest key alone is more than per, no count is enough, and it returns
// the count that carries the rest.
func partition(load, hot, per float64, atLeast int) (groups int, busiest float64) {
	switch {
	case load <= per:
		return 1, load
	case hot < per:
		groups = countOf((load - hot) / (per - hot))
	default:
		groups = countOf(load / per)
	}
	groups = max(groups, atLeast, 1)
	return groups, hot + (load-hot)/float64(groups)
}

// countOf rounds x up to a count, bounded far above any real deployment
// so that the conversion cannot overflow.
func countOf(x float64) int { return int(math.Ceil(math.Min(x, 1e12))) }

// carries reports whether what carries per takes load: equal counts,
// whatever the rounding of the division that made them.
func carries(per, load float64) bool { return load <= per*(1+1e-9) }

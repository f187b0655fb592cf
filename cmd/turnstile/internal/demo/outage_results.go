//go:build unix

package demo

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// results are the verdicts: one per phase (reached, and its store
// granted where it should), then the token and fence checks.
func (o *outage) results() []result {
	o.mu.Lock()
	defer o.mu.Unlock()
	var rs []result
	for ph := range outagePhases {
		rs = append(rs, o.phaseResult(ph))
	}
	return append(rs, o.checks.tokens(o.secLabel), o.checks.fence())
}

// phaseResult is the verdict of phase ph: reached, and its store granted
// where it should.
func (o *outage) phaseResult(ph int) result {
	st := &o.stats[ph]
	r := result{Variant: outagePhaseNames[ph]}
	if !st.began {
		r.Summary = "not reached: " + o.failedAt
		r.add("reached", false)
		return r
	}
	reached := st.ended
	var want string // the store that must have granted in this phase
	switch ph {
	case phaseNormal, phaseRecovered:
		want = primaryLabel
	case phaseFallback:
		want = o.secLabel
	}
	r.OK = reached && (want == "" || st.granted[want] > 0)
	var b strings.Builder
	o.timings(&b, st, "")
	if st.busy > 0 {
		fmt.Fprintf(&b, "; %s not acquired", num(st.busy))
	}
	if st.note != "" {
		b.WriteString("; " + st.note)
	}
	switch {
	case !reached:
		b.WriteString("; did not end: " + o.failedAt)
	case want != "" && st.granted[want] == 0:
		fmt.Fprintf(&b, "; %s granted nothing", want)
	}
	r.Summary = b.String()
	r.add("reached", reached)
	r.add("start_s", st.start.Seconds())
	r.add("seconds", (st.end - st.start).Seconds())
	r.add("acquisitions", st.granted[primaryLabel]+st.granted[o.secLabel])
	r.add("by_redlock", st.granted[primaryLabel])
	r.add("by_secondary", st.granted[o.secLabel])
	r.add("secondary", o.secLabel)
	r.add("not_acquired", st.busy)
	r.add("failed", st.failed)
	r.add("acquire_p50_ms", ms(percentile(st.grantLat, 0.5)))
	r.add("acquire_p99_ms", ms(percentile(st.grantLat, 0.99)))
	r.add("fail_p50_ms", ms(percentile(st.failLat, 0.5)))
	r.add("fail_p99_ms", ms(percentile(st.failLat, 0.99)))
	var failMax time.Duration
	if len(st.failLat) > 0 {
		failMax = slices.Max(st.failLat)
	}
	r.add("fail_max_ms", ms(failMax))
	r.add("ttl_ms", o.cfg.ttl.Milliseconds())
	r.add("release_failed", st.releaseFailed)
	if ph == phaseQuorumLost {
		r.add("breakers_open_ms", ms(st.breakersOpen))
	}
	if st.firstErr != "" {
		r.add("first_error", st.firstErr)
	}
	return r
}

// percentile is the nearest-rank q-quantile of ds, 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// fmtDur rounds d for reading: 1.23ms, 412µs, 2.041s.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

package metrics

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstilelock/turnstile"
)

// Collector turns turnstile events into Prometheus metrics. It is safe for
// concurrent use. Observe and ObserveQuorum do no I/O, hold no lock longer
// than a map update, and, once a backend has been seen, do not allocate.
// Create it with New.
//
// The metrics, with the default namespace:
//
//	turnstile_acquire_duration_seconds{backend,outcome}  histogram: Acquire/TryAcquire latency
//	turnstile_acquisitions_total{backend,outcome}        acquired, not_acquired, error
//	turnstile_acquire_retries{backend}                   histogram: retries per acquisition (average = sum/count)
//	turnstile_redlock_quorum_rounds_total{op,outcome}    acquire/extend/release rounds: reached, no_quorum
//	turnstile_renewals_total{backend,outcome}            watchdog renewals: ok, refused, error
//	turnstile_forced_expiries_total{backend}             leases lost without Release (ErrLockLost)
//	turnstile_releases_total{backend,outcome}            released, not_held, error
//	turnstile_force_releases_total{backend}              locks an operator removed by force (Client.ForceRelease)
//	turnstile_leases_held{backend}                       gauge: leases held now
//	turnstile_waiters{backend}                           gauge: Acquire calls waiting now
//	turnstile_breaker_state{name}                        gauge: 0 closed, 1 half-open, 2 open (-1 unknown)
type Collector struct {
	latency      *prometheus.HistogramVec
	acquisitions *prometheus.CounterVec
	retries      *prometheus.HistogramVec
	quorum       *prometheus.CounterVec
	renewals     *prometheus.CounterVec
	expiries     *prometheus.CounterVec
	releases     *prometheus.CounterVec
	forced       *prometheus.CounterVec
	held         *prometheus.GaugeVec
	waiters      *prometheus.GaugeVec
	breaker      *prometheus.GaugeVec

	series sync.Map               // backend name → *series
	last   atomic.Pointer[series] // the series used last: most Clients talk to one store
	newMu  sync.Mutex
	rounds [len(quorumOps)][2]prometheus.Counter // [op][reached]
	leases heldSet
}

// Label values of the outcome label, by metric.
var (
	acquireOutcomes = [...]string{"acquired", "not_acquired", "error"}
	renewalOutcomes = [...]string{"ok", "refused", "error"}
	releaseOutcomes = [...]string{"released", "not_held", "error"}
	quorumOps       = [...]string{"acquire", "extend", "release"}
	quorumOutcomes  = [2]string{"no_quorum", "reached"}
)

const (
	acquired = iota
	notAcquired
	acquireError
)

const (
	renewOK = iota
	renewRefused
	renewError
)

const (
	released = iota
	releaseNotHeld
	releaseError
)

// series holds the metrics of one backend, resolved once so that
// observing an event is a map lookup and a few atomic adds.
type series struct {
	backend      string
	latency      [len(acquireOutcomes)]prometheus.Observer
	acquisitions [len(acquireOutcomes)]prometheus.Counter
	retries      prometheus.Observer
	renewals     [len(renewalOutcomes)]prometheus.Counter
	expiries     prometheus.Counter
	releases     [len(releaseOutcomes)]prometheus.Counter
	forced       prometheus.Counter
	held         prometheus.Gauge
	waiters      prometheus.Gauge
}

// New creates a Collector and registers its metrics on reg. It fails,
// registering nothing, if reg is nil, an option is invalid (errors match
// turnstile.ErrInvalidOption), or reg already has metrics of these names
// (use WithNamespace for a second Collector on one registry).
func New(reg prometheus.Registerer, opts ...Option) (*Collector, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil prometheus.Registerer", turnstile.ErrInvalidOption)
	}
	cfg := config{namespace: DefaultNamespace, buckets: DefaultBuckets}
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	ns, cl := cfg.namespace, cfg.constant
	counter := func(name string, labels []string, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, ConstLabels: cl, Help: help}, labels)
	}
	gauge := func(name string, labels []string, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, ConstLabels: cl, Help: help}, labels)
	}
	histogram := func(name string, buckets []float64, labels []string, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, ConstLabels: cl, Buckets: buckets, Help: help}, labels)
	}
	c := &Collector{
		latency:      histogram("acquire_duration_seconds", cfg.buckets, []string{"backend", "outcome"}, "Time from an Acquire or TryAcquire call to its outcome, waiting included."),
		acquisitions: counter("acquisitions_total", []string{"backend", "outcome"}, "Acquire and TryAcquire calls by outcome: acquired, not_acquired (the lock stayed held), error (store or context error)."),
		retries:      histogram("acquire_retries", retryBuckets, []string{"backend"}, "Attempts an acquisition made after its first; sum/count is the average retries per acquisition."),
		quorum:       counter("redlock_quorum_rounds_total", []string{"op", "outcome"}, "Redlock rounds by op (acquire, extend, release) and outcome: reached (the answers decided it: a quorum granted, or refusals settled it) or no_quorum (failed or timed-out nodes kept a quorum out of reach)."),
		renewals:     counter("renewals_total", []string{"backend", "outcome"}, "Watchdog renewals by outcome: ok, refused (the store no longer held the lease), error (store error or timeout)."),
		expiries:     counter("forced_expiries_total", []string{"backend"}, "Leases lost while held, without Release: a renewal was refused or the lease's deadline passed without one."),
		releases:     counter("releases_total", []string{"backend", "outcome"}, "Lease.Release calls by outcome: released, not_held (the store no longer held the lease), error (store error)."),
		forced:       counter("force_releases_total", []string{"backend"}, "Locks an operator removed whoever held them (Client.ForceRelease, turnstile unlock --force), one per removed holder."),
		held:         gauge("leases_held", []string{"backend"}, "Leases held now: acquired and neither released nor lost."),
		waiters:      gauge("waiters", []string{"backend"}, "Acquire calls waiting now for a lock another owner holds."),
		breaker:      gauge("breaker_state", []string{"name"}, "State of a fallback circuit breaker: 0 closed (primary store), 1 half-open (probing the primary), 2 open (secondary store), -1 unknown."),
	}
	all := []prometheus.Collector{c.latency, c.acquisitions, c.retries, c.quorum, c.renewals,
		c.expiries, c.releases, c.forced, c.held, c.waiters, c.breaker}
	for i, m := range all {
		if err := reg.Register(m); err != nil {
			for _, done := range all[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("metrics: register the %s metrics: %w", ns, err)
		}
	}
	for i, op := range quorumOps {
		for r, outcome := range quorumOutcomes {
			c.rounds[i][r] = c.quorum.WithLabelValues(op, outcome)
		}
	}
	c.leases.init()
	return c, nil
}

// seriesFor returns the metrics of backend, creating them the first time.
func (c *Collector) seriesFor(backend string) *series {
	if s := c.last.Load(); s != nil && s.backend == backend {
		return s
	}
	if s, ok := c.series.Load(backend); ok {
		c.last.Store(s.(*series))
		return s.(*series)
	}
	c.newMu.Lock()
	defer c.newMu.Unlock()
	if s, ok := c.series.Load(backend); ok {
		return s.(*series)
	}
	b := label(backend)
	s := &series{
		backend:  backend,
		retries:  c.retries.WithLabelValues(b),
		expiries: c.expiries.WithLabelValues(b),
		forced:   c.forced.WithLabelValues(b),
		held:     c.held.WithLabelValues(b),
		waiters:  c.waiters.WithLabelValues(b),
	}
	for i, o := range acquireOutcomes {
		s.latency[i] = c.latency.WithLabelValues(b, o)
		s.acquisitions[i] = c.acquisitions.WithLabelValues(b, o)
	}
	for i, o := range renewalOutcomes {
		s.renewals[i] = c.renewals.WithLabelValues(b, o)
	}
	for i, o := range releaseOutcomes {
		s.releases[i] = c.releases.WithLabelValues(b, o)
	}
	c.series.Store(backend, s)
	c.last.Store(s)
	return s
}

// label makes s a valid label value: Prometheus refuses invalid UTF-8.
func label(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Observe implements turnstile.Observer.
func (c *Collector) Observe(e turnstile.Event) {
	if c == nil {
		return
	}
	switch e.Type {
	case turnstile.EventWaiting:
		c.seriesFor(e.Backend).waiters.Inc()
	case turnstile.EventAcquired:
		s := c.seriesFor(e.Backend)
		c.acquisition(s, e, acquired)
		if c.leases.add(e.Owner) {
			s.held.Inc()
		}
	case turnstile.EventFailed:
		outcome := acquireError
		if errors.Is(e.Err, turnstile.ErrNotAcquired) {
			outcome = notAcquired
		}
		c.acquisition(c.seriesFor(e.Backend), e, outcome)
	case turnstile.EventExtended:
		if e.Renewal {
			c.seriesFor(e.Backend).renewals[renewOK].Inc()
		}
	case turnstile.EventRenewFailed:
		c.seriesFor(e.Backend).renewals[renewError].Inc()
	case turnstile.EventReleased:
		s := c.seriesFor(e.Backend)
		switch {
		case e.Refused:
			s.releases[releaseNotHeld].Inc()
		case e.Err != nil:
			s.releases[releaseError].Inc()
		default:
			s.releases[released].Inc()
		}
		// A lease lost earlier, or released again after a store error,
		// was counted out already.
		if c.leases.remove(e.Owner) {
			s.held.Dec()
		}
	case turnstile.EventForceReleased:
		c.seriesFor(e.Backend).forced.Inc()
	case turnstile.EventLost:
		s := c.seriesFor(e.Backend)
		if errors.Is(e.Err, turnstile.ErrLockLost) {
			s.expiries.Inc()
			if e.Renewal {
				// The watchdog's last renewal was refused, or failed or
				// went unanswered until the deadline.
				if e.Refused {
					s.renewals[renewRefused].Inc()
				} else {
					s.renewals[renewError].Inc()
				}
			}
		}
		if c.leases.remove(e.Owner) {
			s.held.Dec()
		}
	}
}

func (c *Collector) acquisition(s *series, e turnstile.Event, outcome int) {
	s.latency[outcome].Observe(e.Wait.Seconds())
	s.acquisitions[outcome].Inc()
	s.retries.Observe(float64(e.Retries))
	if e.Waited {
		s.waiters.Dec()
	}
}

// ObserveQuorum counts one decided Redlock round: give it to
// redlock.WithQuorumObserver.
func (c *Collector) ObserveQuorum(op string, reached bool) {
	if c == nil {
		return
	}
	r := 0
	if reached {
		r = 1
	}
	for i, known := range quorumOps {
		if op == known {
			c.rounds[i][r].Inc()
			return
		}
	}
	c.quorum.WithLabelValues(label(op), quorumOutcomes[r]).Inc()
}

// Breaker states as the breaker_state gauge shows them.
const (
	BreakerClosed   = 0
	BreakerHalfOpen = 1
	BreakerOpen     = 2
	BreakerUnknown  = -1
)

// SetBreakerState records the state of the circuit breaker called name:
// "closed", "half-open" or "open", as fallback.State.String returns them.
// Any other state is recorded as -1 (BreakerUnknown). Use it with
// fallback.WithOnStateChange:
//
//	fallback.WithOnStateChange(func(_, to fallback.State) { m.SetBreakerState("orders", to.String()) })
//
// and once with the breaker's state at start, which no change reports.
func (c *Collector) SetBreakerState(name, state string) {
	if c == nil {
		return
	}
	v := BreakerUnknown
	switch state {
	case "closed":
		v = BreakerClosed
	case "half-open":
		v = BreakerHalfOpen
	case "open":
		v = BreakerOpen
	}
	c.breaker.WithLabelValues(label(name)).Set(float64(v))
}

package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/metrics"
)

func TestNewRejectsBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		reg  prometheus.Registerer
		opts []metrics.Option
	}{
		"nil registerer":           {nil, nil},
		"nil option":               {prometheus.NewRegistry(), []metrics.Option{nil}},
		"empty namespace":          {prometheus.NewRegistry(), []metrics.Option{metrics.WithNamespace("")}},
		"namespace with a dash":    {prometheus.NewRegistry(), []metrics.Option{metrics.WithNamespace("lock-service")}},
		"namespace with a digit":   {prometheus.NewRegistry(), []metrics.Option{metrics.WithNamespace("1locks")}},
		"no buckets":               {prometheus.NewRegistry(), []metrics.Option{metrics.WithBuckets()}},
		"zero bucket":              {prometheus.NewRegistry(), []metrics.Option{metrics.WithBuckets(0, 1)}},
		"negative bucket":          {prometheus.NewRegistry(), []metrics.Option{metrics.WithBuckets(-1, 1)}},
		"infinite bucket":          {prometheus.NewRegistry(), []metrics.Option{metrics.WithBuckets(0.1, math.Inf(1))}},
		"NaN bucket":               {prometheus.NewRegistry(), []metrics.Option{metrics.WithBuckets(math.NaN())}},
		"decreasing buckets":       {prometheus.NewRegistry(), []metrics.Option{metrics.WithBuckets(0.1, 0.01)}},
		"repeated bucket":          {prometheus.NewRegistry(), []metrics.Option{metrics.WithBuckets(0.1, 0.1)}},
		"65 buckets":               {prometheus.NewRegistry(), []metrics.Option{metrics.WithBuckets(manyBuckets(65)...)}},
		"const label 'backend'":    {prometheus.NewRegistry(), []metrics.Option{metrics.WithConstLabels(prometheus.Labels{"backend": "x"})}},
		"const label '__reserved'": {prometheus.NewRegistry(), []metrics.Option{metrics.WithConstLabels(prometheus.Labels{"__x": "x"})}},
		"const label 'a-b'":        {prometheus.NewRegistry(), []metrics.Option{metrics.WithConstLabels(prometheus.Labels{"a-b": "x"})}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := metrics.New(tc.reg, tc.opts...)
			if !errors.Is(err, turnstile.ErrInvalidOption) || c != nil {
				t.Fatalf("New = %v, %v; want nil and an error matching ErrInvalidOption", c, err)
			}
		})
	}
}

func manyBuckets(n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = float64(i + 1)
	}
	return b
}

// failingRegisterer registers on a real registry until its failAt-th
// Register call, which fails, and keeps what is registered.
type failingRegisterer struct {
	*prometheus.Registry
	calls, failAt int
	live          map[prometheus.Collector]bool
}

func (f *failingRegisterer) Register(c prometheus.Collector) error {
	f.calls++
	if f.calls == f.failAt {
		return errors.New("refused")
	}
	if err := f.Registry.Register(c); err != nil {
		return err
	}
	f.live[c] = true
	return nil
}

func (f *failingRegisterer) Unregister(c prometheus.Collector) bool {
	delete(f.live, c)
	return f.Registry.Unregister(c)
}

// TestNewRegistersAllOrNothing: a failed registration leaves the registry
// as it was, so that the caller can retry.
func TestNewRegistersAllOrNothing(t *testing.T) {
	for failAt := 1; failAt <= 10; failAt++ {
		f := &failingRegisterer{Registry: prometheus.NewRegistry(), failAt: failAt, live: map[prometheus.Collector]bool{}}
		if c, err := metrics.New(f); err == nil || c != nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("New with registration %d failing = %v, %v; want nil and the registry's error", failAt, c, err)
		}
		if len(f.live) != 0 {
			t.Fatalf("registration %d failed and %d metrics stayed registered", failAt, len(f.live))
		}
		if _, err := metrics.New(f.Registry); err != nil {
			t.Fatalf("New on the same registry after the failure: %v", err)
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg); err == nil {
		t.Fatal("a second Collector with the same namespace on one registry was accepted")
	}
	if _, err := metrics.New(reg, metrics.WithNamespace("locks")); err != nil {
		t.Fatalf("a second Collector with another namespace: %v", err)
	}
}

func TestOptions(t *testing.T) {
	m, reg := newCollector(t, metrics.WithNamespace("locks"), metrics.WithBuckets(0.001, 0.01),
		metrics.WithConstLabels(prometheus.Labels{"region": "eu"}))
	m.Observe(turnstile.Event{Type: turnstile.EventAcquired, Backend: "memory", Owner: "o1", Wait: 5_000_000})
	want := `
# HELP locks_acquire_duration_seconds Time from an Acquire or TryAcquire call to its outcome, waiting included.
# TYPE locks_acquire_duration_seconds histogram
locks_acquire_duration_seconds_bucket{backend="memory",outcome="acquired",region="eu",le="0.001"} 0
locks_acquire_duration_seconds_bucket{backend="memory",outcome="acquired",region="eu",le="0.01"} 1
locks_acquire_duration_seconds_bucket{backend="memory",outcome="acquired",region="eu",le="+Inf"} 1
locks_acquire_duration_seconds_sum{backend="memory",outcome="acquired",region="eu"} 0.005
locks_acquire_duration_seconds_count{backend="memory",outcome="acquired",region="eu"} 1
locks_acquire_duration_seconds_bucket{backend="memory",outcome="error",region="eu",le="0.001"} 0
locks_acquire_duration_seconds_bucket{backend="memory",outcome="error",region="eu",le="0.01"} 0
locks_acquire_duration_seconds_bucket{backend="memory",outcome="error",region="eu",le="+Inf"} 0
locks_acquire_duration_seconds_sum{backend="memory",outcome="error",region="eu"} 0
locks_acquire_duration_seconds_count{backend="memory",outcome="error",region="eu"} 0
locks_acquire_duration_seconds_bucket{backend="memory",outcome="not_acquired",region="eu",le="0.001"} 0
locks_acquire_duration_seconds_bucket{backend="memory",outcome="not_acquired",region="eu",le="0.01"} 0
locks_acquire_duration_seconds_bucket{backend="memory",outcome="not_acquired",region="eu",le="+Inf"} 0
locks_acquire_duration_seconds_sum{backend="memory",outcome="not_acquired",region="eu"} 0
locks_acquire_duration_seconds_count{backend="memory",outcome="not_acquired",region="eu"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "locks_acquire_duration_seconds"); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultBucketsHoldTheThresholds(t *testing.T) {
	for _, s := range []float64{0.0001, 0.001, 0.005, 0.02, 0.1, 1} {
		found := false
		for _, b := range metrics.DefaultBuckets {
			found = found || b == s
		}
		if !found {
			t.Errorf("DefaultBuckets lack %vs, an alert level or an end of the range", s)
		}
	}
}

// TestEventOutcomes feeds the Collector the events a Client sends and
// checks where each is counted.
func TestEventOutcomes(t *testing.T) {
	lost := fmt.Errorf("acquire lock:a: %w: renewal refused", turnstile.ErrLockLost)
	for _, tc := range []struct {
		name   string
		events []turnstile.Event
		metric string
		labels []string
		want   float64
	}{
		{"TryAcquire refused", []turnstile.Event{{Type: turnstile.EventFailed, Err: fmt.Errorf("acquire: %w", turnstile.ErrNotAcquired)}},
			"turnstile_acquisitions_total", []string{"outcome", "not_acquired"}, 1},
		{"acquisition cut by its context", []turnstile.Event{{Type: turnstile.EventFailed, Err: fmt.Errorf("acquire: %w", context.DeadlineExceeded)}},
			"turnstile_acquisitions_total", []string{"outcome", "error"}, 1},
		{"holder's own Extend is not a watchdog renewal", []turnstile.Event{{Type: turnstile.EventExtended}},
			"turnstile_renewals_total", []string{"outcome", "ok"}, 0},
		{"watchdog renewal", []turnstile.Event{{Type: turnstile.EventExtended, Renewal: true}},
			"turnstile_renewals_total", []string{"outcome", "ok"}, 1},
		{"watchdog renewal error", []turnstile.Event{{Type: turnstile.EventRenewFailed, Renewal: true, Err: errFlaky}},
			"turnstile_renewals_total", []string{"outcome", "error"}, 1},
		{"watchdog renewal refused", []turnstile.Event{{Type: turnstile.EventLost, Renewal: true, Refused: true, Err: lost}},
			"turnstile_renewals_total", []string{"outcome", "refused"}, 1},
		{"holder's Extend refused: lost, but no renewal", []turnstile.Event{{Type: turnstile.EventLost, Refused: true, Err: lost}},
			"turnstile_renewals_total", []string{"outcome", "refused"}, 0},
		{"holder's Extend refused: a forced expiry", []turnstile.Event{{Type: turnstile.EventLost, Refused: true, Err: lost}},
			"turnstile_forced_expiries_total", nil, 1},
		{"lost at Close is no forced expiry", []turnstile.Event{{Type: turnstile.EventLost, Err: turnstile.ErrClosed}},
			"turnstile_forced_expiries_total", nil, 0},
		{"release failed", []turnstile.Event{{Type: turnstile.EventReleased, Err: errFlaky}},
			"turnstile_releases_total", []string{"outcome", "error"}, 1},
		{"release found the lock gone", []turnstile.Event{{Type: turnstile.EventReleased, Refused: true, Err: turnstile.ErrNotHeld}},
			"turnstile_releases_total", []string{"outcome", "not_held"}, 1},
		{"lease held", []turnstile.Event{{Type: turnstile.EventAcquired, Owner: "o1"}},
			"turnstile_leases_held", nil, 1},
		{"the same lease reported twice is held once", []turnstile.Event{{Type: turnstile.EventAcquired, Owner: "o1"}, {Type: turnstile.EventAcquired, Owner: "o1"}},
			"turnstile_leases_held", nil, 1},
		{"lost at Close", []turnstile.Event{{Type: turnstile.EventAcquired, Owner: "o1"}, {Type: turnstile.EventLost, Owner: "o1", Err: turnstile.ErrClosed}},
			"turnstile_leases_held", nil, 0},
		{"released again after a store error counts out once", []turnstile.Event{
			{Type: turnstile.EventAcquired, Owner: "o1"}, {Type: turnstile.EventAcquired, Owner: "o2"},
			{Type: turnstile.EventReleased, Owner: "o1", Err: errFlaky}, {Type: turnstile.EventReleased, Owner: "o1"}},
			"turnstile_leases_held", nil, 1},
		{"lost, then released", []turnstile.Event{
			{Type: turnstile.EventAcquired, Owner: "o1"}, {Type: turnstile.EventLost, Owner: "o1", Err: lost},
			{Type: turnstile.EventReleased, Owner: "o1", Refused: true, Err: turnstile.ErrNotHeld}},
			"turnstile_leases_held", nil, 0},
		{"waiting", []turnstile.Event{{Type: turnstile.EventWaiting}, {Type: turnstile.EventWaiting}},
			"turnstile_waiters", nil, 2},
		{"waited and got it", []turnstile.Event{{Type: turnstile.EventWaiting}, {Type: turnstile.EventAcquired, Owner: "o1", Waited: true}},
			"turnstile_waiters", nil, 0},
		{"waited and gave up", []turnstile.Event{{Type: turnstile.EventWaiting}, {Type: turnstile.EventFailed, Waited: true, Err: turnstile.ErrNotAcquired}},
			"turnstile_waiters", nil, 0},
		{"did not wait", []turnstile.Event{{Type: turnstile.EventWaiting}, {Type: turnstile.EventFailed, Err: turnstile.ErrNotAcquired}},
			"turnstile_waiters", nil, 1},
		{"unknown event type", []turnstile.Event{{Type: turnstile.EventType(200)}, {Type: 0}},
			"turnstile_waiters", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newCollector(t)
			m.Observe(turnstile.Event{Type: turnstile.EventWaiting, Backend: "redis 10.0.0.1:6379"}) // creates the series
			m.Observe(turnstile.Event{Type: turnstile.EventFailed, Backend: "redis 10.0.0.1:6379", Waited: true, Err: turnstile.ErrNotAcquired})
			base := value(t, reg, tc.metric, append([]string{"backend", "redis 10.0.0.1:6379"}, tc.labels...)...)
			for _, e := range tc.events {
				e.Backend = "redis 10.0.0.1:6379"
				m.Observe(e)
			}
			got := value(t, reg, tc.metric, append([]string{"backend", "redis 10.0.0.1:6379"}, tc.labels...)...)
			if got-base != tc.want {
				t.Errorf("%s%v went from %v to %v, want +%v", tc.metric, tc.labels, base, got, tc.want)
			}
		})
	}
}

// TestBackendsApart: each store gets its own series; a name that is not
// valid UTF-8 is still counted, not dropped and not a panic.
func TestBackendsApart(t *testing.T) {
	m, reg := newCollector(t)
	for _, b := range []string{"redis 10.0.0.1:6379", "redis 10.0.0.1:6379", "postgres 10.0.0.2:5432", "bad\xff"} {
		m.Observe(turnstile.Event{Type: turnstile.EventAcquired, Backend: b})
	}
	for b, want := range map[string]float64{"redis 10.0.0.1:6379": 2, "postgres 10.0.0.2:5432": 1, "bad\uFFFD": 1} {
		if got := value(t, reg, "turnstile_acquisitions_total", "backend", b, "outcome", "acquired"); got != want {
			t.Errorf("acquired on %q = %v, want %v", b, got, want)
		}
	}
}

func TestObserveQuorum(t *testing.T) {
	m, reg := newCollector(t)
	m.ObserveQuorum("acquire", true)
	m.ObserveQuorum("acquire", true)
	m.ObserveQuorum("acquire", false)
	m.ObserveQuorum("extend", true)
	m.ObserveQuorum("release", false)
	m.ObserveQuorum("raise fence", true)
	want := `
# HELP turnstile_redlock_quorum_rounds_total Redlock rounds by op (acquire, extend, release) and outcome: reached (the answers decided it: a quorum granted, or refusals settled it) or no_quorum (failed or timed-out nodes kept a quorum out of reach).
# TYPE turnstile_redlock_quorum_rounds_total counter
turnstile_redlock_quorum_rounds_total{op="acquire",outcome="no_quorum"} 1
turnstile_redlock_quorum_rounds_total{op="acquire",outcome="reached"} 2
turnstile_redlock_quorum_rounds_total{op="extend",outcome="no_quorum"} 0
turnstile_redlock_quorum_rounds_total{op="extend",outcome="reached"} 1
turnstile_redlock_quorum_rounds_total{op="raise fence",outcome="reached"} 1
turnstile_redlock_quorum_rounds_total{op="release",outcome="no_quorum"} 1
turnstile_redlock_quorum_rounds_total{op="release",outcome="reached"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "turnstile_redlock_quorum_rounds_total"); err != nil {
		t.Fatal(err)
	}
}

func TestSetBreakerState(t *testing.T) {
	m, reg := newCollector(t)
	for _, tc := range []struct {
		state string
		want  float64
	}{
		{"closed", metrics.BreakerClosed},
		{"open", metrics.BreakerOpen},
		{"half-open", metrics.BreakerHalfOpen},
		{"unknown", metrics.BreakerUnknown},
		{"", metrics.BreakerUnknown},
		{"closed", metrics.BreakerClosed},
	} {
		m.SetBreakerState("orders", tc.state)
		if got := value(t, reg, "turnstile_breaker_state", "name", "orders"); got != tc.want {
			t.Errorf("after SetBreakerState(%q) the gauge is %v, want %v", tc.state, got, tc.want)
		}
	}
	m.SetBreakerState("payments", "open")
	if got := value(t, reg, "turnstile_breaker_state", "name", "payments"); got != metrics.BreakerOpen {
		t.Errorf("second breaker = %v, want %v", got, metrics.BreakerOpen)
	}
}

// TestNilCollector: a nil *Collector ignores everything instead of
// panicking on the lock path.
func TestNilCollector(t *testing.T) {
	var m *metrics.Collector
	m.Observe(turnstile.Event{Type: turnstile.EventAcquired})
	m.ObserveQuorum("acquire", true)
	m.SetBreakerState("orders", "open")
}

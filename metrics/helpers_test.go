package metrics_test

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/metrics"
)

// newCollector registers a Collector on a fresh registry.
func newCollector(t testing.TB, opts ...metrics.Option) (*metrics.Collector, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := metrics.New(reg, opts...)
	if err != nil {
		t.Fatalf("metrics.New: %v", err)
	}
	return c, reg
}

// recorder keeps every event, to compare the metrics with what the Client
// reported.
type recorder struct {
	mu     sync.Mutex
	events []turnstile.Event
}

func (r *recorder) Observe(e turnstile.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// retries sums Retries over the acquisitions' outcomes seen so far.
func (r *recorder) retries() (sum, count int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Type == turnstile.EventAcquired || e.Type == turnstile.EventFailed {
			sum += e.Retries
			count++
		}
	}
	return sum, count
}

// newClient returns a Client on backend observed by a fresh Collector and
// a recorder, closed when the test ends.
func newClient(t *testing.T, backend driver.Backend, opts ...turnstile.Option) (*turnstile.Client, *metrics.Collector, *prometheus.Registry, *recorder) {
	t.Helper()
	m, reg := newCollector(t)
	rec := &recorder{}
	c, err := turnstile.New(backend, append([]turnstile.Option{turnstile.WithObserver(m), turnstile.WithObserver(rec)}, opts...)...)
	if err != nil {
		t.Fatalf("turnstile.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, m, reg, rec
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// value reads one series of the metric called name (a counter or gauge)
// from reg: labels are name=value pairs.
func value(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, ok := find(t, reg, name, labels...)
	if !ok {
		t.Fatalf("%s%v: no such series", name, labels)
	}
	return v
}

// histogram reads the sample count and sum of one histogram series.
func histogram(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) (count uint64, sum float64) {
	t.Helper()
	for m := range series(t, reg, name, labels...) {
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	t.Fatalf("%s%v: no such histogram", name, labels)
	return 0, 0
}

func find(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	for m := range series(t, reg, name, labels...) {
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// series yields the series of the metric called name in reg whose labels
// are labels, name=value pairs.
func series(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) iter.Seq[*dto.Metric] {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	return func(yield func(*dto.Metric) bool) {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if matches(m.GetLabel(), labels) && !yield(m) {
					return
				}
			}
		}
	}
}

func matches[L interface {
	GetName() string
	GetValue() string
}](have []L, want []string) bool {
	if len(have) != len(want)/2 {
		return false
	}
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range have {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// eventually waits, up to 10 s, for cond to hold.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// gaugeOf reads a gauge child through testutil.
func gaugeOf(t testing.TB, reg prometheus.Gatherer, name, backend string) float64 {
	t.Helper()
	return value(t, reg, name, "backend", backend)
}

var errFlaky = errors.New("store unavailable")

// flaky is a store in front of a memory backend whose calls fail while
// told to: the same driver interface the Client uses, nothing more.
type flaky struct {
	mem         *memory.Backend
	failAcquire atomic.Bool
	failExtend  atomic.Bool
}

func (f *flaky) Name() string { return "flaky" }

func (f *flaky) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if f.failAcquire.Load() {
		return 0, false, errFlaky
	}
	return f.mem.Acquire(ctx, key, owner, ttl)
}

func (f *flaky) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if f.failExtend.Load() {
		return false, errFlaky
	}
	return f.mem.Extend(ctx, key, owner, ttl)
}

func (f *flaky) Release(ctx context.Context, key, owner string) (bool, error) {
	return f.mem.Release(ctx, key, owner)
}

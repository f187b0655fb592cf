package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/metrics"
)

// A Collector observes a Client; its figures are served by metrics.Serve
// (or metrics.Handler) from the registry it was given.
func Example() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		panic(err)
	}
	c, err := turnstile.New(memory.New(), turnstile.WithObserver(m))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	lease, err := c.Acquire(ctx, "lock:inventory:12345")
	if err != nil {
		panic(err)
	}
	_, err = c.TryAcquire(ctx, "lock:inventory:12345")
	fmt.Println("second caller refused:", errors.Is(err, turnstile.ErrNotAcquired))
	if err := lease.Release(ctx); err != nil {
		panic(err)
	}

	// What a scrape of /metrics would show, in part.
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP turnstile_acquisitions_total Acquire and TryAcquire calls by outcome: acquired, not_acquired (the lock stayed held), error (store or context error).
# TYPE turnstile_acquisitions_total counter
turnstile_acquisitions_total{backend="memory",outcome="acquired"} 1
turnstile_acquisitions_total{backend="memory",outcome="error"} 0
turnstile_acquisitions_total{backend="memory",outcome="not_acquired"} 1
# HELP turnstile_leases_held Leases held now: acquired and neither released nor lost.
# TYPE turnstile_leases_held gauge
turnstile_leases_held{backend="memory"} 0
`), "turnstile_acquisitions_total", "turnstile_leases_held")
	fmt.Println("metrics as expected:", err == nil)
	// Output:
	// second caller refused: true
	// metrics as expected: true
}

// A Redlock and a fallback breaker report to the same Collector:
//
//	rl, err := redlock.Dial(ctx, addrs, rueidis.ClientOption{}, redlock.WithQuorumObserver(m.ObserveQuorum))
//	fb, err := fallback.New(rl, pg, fallback.WithOnStateChange(func(_, to fallback.State) {
//		m.SetBreakerState("orders", to.String())
//	}))
//
// Here the callbacks are called as those packages call them.
func ExampleCollector_ObserveQuorum() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		panic(err)
	}
	m.ObserveQuorum("acquire", true)
	m.ObserveQuorum("acquire", false)
	m.SetBreakerState("orders", "open")

	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			var v float64
			if s.Counter != nil {
				v = s.GetCounter().GetValue()
			} else if s.Gauge != nil {
				v = s.GetGauge().GetValue()
			}
			if v != 0 {
				fmt.Println(mf.GetName(), labels(s.GetLabel()), v)
			}
		}
	}
	// Output:
	// turnstile_breaker_state name=orders 2
	// turnstile_redlock_quorum_rounds_total op=acquire,outcome=no_quorum 1
	// turnstile_redlock_quorum_rounds_total op=acquire,outcome=reached 1
}

func labels[L interface {
	GetName() string
	GetValue() string
}](ls []L) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.GetName() + "=" + l.GetValue()
	}
	return strings.Join(parts, ",")
}

// Serve exposes a registry at /metrics until its context ends.
func ExampleServe() {
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", reg)
	if err != nil {
		panic(err)
	}
	fmt.Println("scrape", "http://"+addr.String()+metrics.Path, "until cancel()")
}

package metrics_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/turnstilelock/turnstile"
)

// lifecycleEvents are the events of one lease that waited once, was
// renewed and released, with owner ids drawn from owners.
func lifecycleEvents(owners []string, i int) []turnstile.Event {
	const backend = "redis 10.0.0.1:6379"
	owner := owners[i%len(owners)]
	return []turnstile.Event{
		{Type: turnstile.EventWaiting, Backend: backend, Key: "lock:inventory:12345"},
		{Type: turnstile.EventAcquired, Backend: backend, Key: "lock:inventory:12345", Owner: owner, Wait: 1_500_000, Retries: 2, Waited: true},
		{Type: turnstile.EventExtended, Backend: backend, Key: "lock:inventory:12345", Owner: owner, Renewal: true},
		{Type: turnstile.EventReleased, Backend: backend, Key: "lock:inventory:12345", Owner: owner},
		{Type: turnstile.EventFailed, Backend: backend, Key: "lock:inventory:12345", Err: errNotAcquired},
	}
}

var errNotAcquired = fmt.Errorf("acquire lock:inventory:12345: %w", turnstile.ErrNotAcquired)

func owners(n int) []string {
	o := make([]string, n)
	for i := range o {
		o[i] = "host-1/" + strconv.Itoa(i) + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	}
	return o
}

// TestObserveDoesNotAllocate: once a backend has been seen, counting an
// event allocates nothing, leases coming and going included.
func TestObserveDoesNotAllocate(t *testing.T) {
	m, _ := newCollector(t)
	own := owners(64)
	events := make([][]turnstile.Event, len(own))
	for i := range events {
		events[i] = lifecycleEvents(own, i)
		for _, e := range events[i] {
			m.Observe(e) // warm up: series and held-set slots
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		for _, e := range events[i%len(events)] {
			m.Observe(e)
		}
		m.ObserveQuorum("acquire", true)
		i++
	})
	if allocs != 0 {
		t.Fatalf("a lease's events and a quorum round allocate %v times, want 0", allocs)
	}
}

// BenchmarkObserve measures one event of a steady mix: waiting, acquired,
// renewed, released, failed.
func BenchmarkObserve(b *testing.B) {
	m, _ := newCollector(b)
	own := owners(1024)
	events := make([]turnstile.Event, 0, 5*len(own))
	for i := range own {
		events = append(events, lifecycleEvents(own, i)...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m.Observe(events[i%len(events)])
	}
}

// BenchmarkObserveParallel is BenchmarkObserve from every CPU at once,
// each goroutine with leases of its own.
func BenchmarkObserveParallel(b *testing.B) {
	m, _ := newCollector(b)
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		base := int(next.Add(1)) * 1024
		own := owners(base + 1024)[base:]
		events := make([]turnstile.Event, 0, 5*len(own))
		for i := range own {
			events = append(events, lifecycleEvents(own, i)...)
		}
		i := 0
		for pb.Next() {
			m.Observe(events[i%len(events)])
			i++
		}
	})
}

// BenchmarkObserveQuorum measures one Redlock round.
func BenchmarkObserveQuorum(b *testing.B) {
	m, _ := newCollector(b)
	b.ReportAllocs()
	for i := range b.N {
		m.ObserveQuorum("extend", i%100 != 0)
	}
}

package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile"
)

// ScaleResult is what Scale measured.
type ScaleResult struct {
	Kind   string  `json:"kind"` // "scale"
	Leases int     `json:"leases"`
	TTL    float64 `json:"ttl_seconds"`
	// AcquireSeconds is how long taking every lease took.
	AcquireSeconds float64 `json:"acquire_seconds"`
	// HeldSeconds is how long all leases were held after the last was
	// taken: three renewal periods.
	HeldSeconds float64 `json:"held_seconds"`
	// BytesPerLease is the growth of the client's in-use heap after
	// garbage collection, per lease held (the caller's slice of lease
	// pointers not counted).
	BytesPerLease float64 `json:"bytes_per_lease"`
	// RenewalsPerSecond is script calls per second on the server while
	// the leases were held, CommandsPerSecond every command (scripts'
	// commands included).
	RenewalsPerSecond float64 `json:"renewals_per_second"`
	CommandsPerSecond float64 `json:"commands_per_second"`
	// NeededPerSecond is the renewal rate that renews every lease once
	// per renewal period: leases ÷ (ttl/3). A server that runs fewer
	// renewal scripts per second than this cannot keep every lease.
	NeededPerSecond float64 `json:"needed_renewals_per_second"`
	// ForcedExpiries counts leases whose Context ended with
	// turnstile.ErrLockLost before they were released.
	ForcedExpiries int `json:"forced_expiries"`
	// ServerCores is the server's CPU time while the leases were held
	// over the time they were held: 1 is one core busy all along.
	ServerCores float64 `json:"server_cores"`
	// ReleaseSeconds is how long releasing every lease took.
	ReleaseSeconds float64 `json:"release_seconds"`
}

// scaleWorkers is how many goroutines take and release the leases.
const scaleWorkers = 256

// Scale holds leases leases with turnstile on url (a redis:// URL; the
// server at addr is the one whose counters are read) under one client's
// watchdog for three renewal periods (the default period, ttl/3), then
// releases them.
func Scale(ctx context.Context, url, addr string, leases int, ttl time.Duration) (ScaleResult, error) {
	r := ScaleResult{Kind: "scale", Leases: leases, TTL: ttl.Seconds(), NeededPerSecond: float64(leases) / (ttl.Seconds() / 3)}
	if leases < 1 {
		return r, fmt.Errorf("%w: scale with %d leases", ErrUsage, leases)
	}
	counter, err := NewCounter([]string{addr})
	if err != nil {
		return r, err
	}
	defer counter.Close()
	c, err := turnstile.Open(ctx, url, turnstile.WithTTL(ttl))
	if err != nil {
		return r, fmt.Errorf("workload: scale: open turnstile: %w", err)
	}
	defer c.Close()
	prefix := "scale:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
	held := make([]*turnstile.Lease, leases)
	base := heapInUse()

	start := time.Now()
	if err := forEach(leases, func(i int) error {
		l, err := c.TryAcquire(ctx, prefix+strconv.Itoa(i))
		held[i] = l
		return err
	}); err != nil {
		return r, fmt.Errorf("workload: scale: acquire: %w", err)
	}
	r.AcquireSeconds = time.Since(start).Seconds()
	r.BytesPerLease = float64(int64(heapInUse())-int64(base)) / float64(leases)

	before, err := counter.Read(ctx)
	if err != nil {
		return r, err
	}
	holdStart := time.Now()
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(ttl): // three renewal periods of ttl/3
	}
	after, err := counter.Read(ctx)
	if err != nil {
		return r, err
	}
	r.HeldSeconds = time.Since(holdStart).Seconds()
	d := after.Sub(before)
	r.RenewalsPerSecond = float64(d.Commands.Scripts()) / r.HeldSeconds
	r.CommandsPerSecond = float64(d.Commands.Total()) / r.HeldSeconds
	r.ServerCores = d.CPUSeconds / r.HeldSeconds
	for _, l := range held {
		if errors.Is(context.Cause(l.Context()), turnstile.ErrLockLost) {
			r.ForcedExpiries++
		}
	}

	start = time.Now()
	_ = forEach(leases, func(i int) error {
		_ = held[i].Release(ctx) // a lost lease refuses; it is counted above
		return nil
	})
	r.ReleaseSeconds = time.Since(start).Seconds()
	runtime.KeepAlive(held)
	return r, nil
}

// forEach calls fn(0) … fn(n-1) from scaleWorkers goroutines and returns
// the first error, after which no more calls start.
func forEach(n int, fn func(i int) error) error {
	var (
		next  atomic.Int64
		first error
		once  sync.Once
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for range scaleWorkers {
		wg.Go(func() {
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return first
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

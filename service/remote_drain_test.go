package service_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
)

// TestRemoteDrainFailover: Go clients busy on an instance that drains —
// their Batch calls over HTTP/1.1, a few idle between calls — go on
// through the other instance without one error.
func TestRemoteDrainFailover(t *testing.T) {
	store := memory.New()
	a := startInstance(t, service.Config{Backend: store}, func(o *service.ServeOptions) { o.DrainTimeout = 20 * time.Second })
	b := startInstance(t, service.Config{Backend: store})
	ctx := ctxFor(t, time.Minute)
	c, err := turnstile.New(dial(t, "turnstile://"+a.addr+","+b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var pairs atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l, err := c.TryAcquire(ctx, fmt.Sprintf("drain:%d:%d", w, i))
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
				pairs.Add(1)
				if w%4 == 0 {
					// Some connections idle a while between calls.
					time.Sleep(time.Duration(w) * 10 * time.Millisecond)
				}
			}
		})
	}
	waitPairs := func(n int64) {
		t.Helper()
		if err := proc.Poll(30*time.Second, time.Millisecond, func() error {
			if pairs.Load() < n {
				return errNotYet
			}
			return nil
		}); err != nil {
			t.Fatalf("%d pairs, want %d", pairs.Load(), n)
		}
	}
	waitPairs(500)
	a.stop()
	waitPairs(pairs.Load() + 500)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a pair failed as an instance drained: %v", err)
	}
}

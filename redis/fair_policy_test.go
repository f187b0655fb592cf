package redis_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestFairRetryFirst: with WithRetryFirst a waiter retries before it
// queues while the key's mean retry count is low, and queues at once when
// it is high; the mean follows contention up and down.
func TestFairRetryFirst(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, time.Minute)
	b := dial(t, srv)
	const threshold = 2
	f, err := b.Fair(redis.WithRetryFirst(threshold))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Fair(redis.WithRetryFirst(0.5)); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("WithRetryFirst(0.5) = %v, want ErrInvalidOption", err)
	}
	const k = "kinds:retry-first"

	// scripts counts the scripts the server has run.
	calls := regexp.MustCompile(`cmdstat_evalsha:calls=(\d+)`)
	scripts := func() int {
		m := calls.FindStringSubmatch(mustDo(t, srv, "INFO", "commandstats"))
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	// contended makes one waiter wait behind a holder, and returns how
	// many scripts it ran before it learnt its place in the queue.
	contended := func(i int) int {
		t.Helper()
		holder := "holder-" + strconv.Itoa(i)
		if _, ok, err := b.Acquire(ctx, k, holder, time.Minute); !ok || err != nil {
			t.Fatalf("holder: %v %v", ok, err)
		}
		start := scripts()
		queued := make(chan int, 1)
		wctx := driver.WithPositionFunc(ctx, func(int) {
			select {
			case queued <- scripts() - start:
			default:
			}
		})
		got := make(chan error, 1)
		owner := "waiter-" + strconv.Itoa(i)
		go func() {
			_, err := f.AcquireWait(wctx, k, owner, time.Minute)
			got <- err
		}()
		var ran int
		select {
		case ran = <-queued:
		case err := <-got:
			t.Fatalf("waiter %d returned before it queued: %v", i, err)
		}
		if ok, err := b.Release(ctx, k, holder); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
		if ok, err := f.Release(ctx, k, owner); !ok || err != nil {
			t.Fatal(ok, err)
		}
		return ran
	}

	// Low mean: threshold+1 tries, then the queue.
	if ran := contended(0); ran != threshold+2 {
		t.Fatalf("with a low mean the waiter ran %d scripts before it queued, want %d tries and the join", ran, threshold+2)
	}
	for i := 1; f.MeanRetries(k) <= threshold; i++ {
		if i > 50 {
			t.Fatalf("mean retries %v after 50 contended acquisitions", f.MeanRetries(k))
		}
		contended(i)
	}
	// High mean: the first script joins the queue.
	if ran := contended(100); ran != 1 {
		t.Fatalf("with mean retries %v above %d the waiter ran %d scripts before it queued, want 1", f.MeanRetries(k), threshold, ran)
	}
	// Uncontended acquisitions bring the mean down again.
	for i := 0; f.MeanRetries(k) > threshold; i++ {
		if i > 50 {
			t.Fatalf("mean retries %v after 50 free acquisitions", f.MeanRetries(k))
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := f.AcquireWait(wctx, k, "free", time.Minute); err != nil {
			t.Fatal(err)
		}
		cancel()
		if ok, err := f.Release(ctx, k, "free"); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if ran := contended(200); ran != threshold+2 {
		t.Fatalf("with the mean low again the waiter ran %d scripts before it queued, want %d", ran, threshold+2)
	}
}

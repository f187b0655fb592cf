package redis_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestReleased: waiters subscribed with Released hear of a release at
// once; one waiter stopping leaves the others subscribed; the last one
// stopping unsubscribes on the server; Close ends every subscription.
func TestReleased(t *testing.T) {
	srv := testserver.StartRedis(t)
	eachLibrary(t, srv, func(t *testing.T, ctx context.Context, name string, b *redis.Backend) {
		k := "notify:" + name
		numsub := func() int {
			// PUBSUB SHARDNUMSUB answers an array; count the
			// subscriptions with a script instead of parsing it.
			n, err := strconv.Atoi(srv.MustDo(t, "EVAL", "return redis.call('PUBSUB', 'SHARDNUMSUB', KEYS[1])[2]", "1", channelKey(k)))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}

		a, stopA, err := b.Released(ctx, k)
		if err != nil {
			t.Fatalf("Released: %v", err)
		}
		c, stopC, err := b.Released(ctx, k)
		if err != nil {
			t.Fatalf("Released: %v", err)
		}
		if n := numsub(); n != 1 {
			t.Fatalf("%d subscriptions on the server for two waiters, want one shared", n)
		}
		releaseOnce(t, b, k)
		for _, ch := range []<-chan struct{}{a, c} {
			awaitNotice(t, ch, "a waiter was not told of the release")
		}

		stopA()
		stopA() // harmless
		releaseOnce(t, b, k)
		awaitNotice(t, c, "one waiter stopping unsubscribed the other")
		stopC()
		waitFor(t, func() bool { return numsub() == 0 }, "the server still has the subscription after the last waiter stopped")

		// Subscribing again right after the last stop still works.
		for range 20 {
			ch, stop, err := b.Released(ctx, k)
			if err != nil {
				t.Fatalf("Released again: %v", err)
			}
			releaseOnce(t, b, k)
			awaitNotice(t, ch, "a re-subscribed waiter was not told of the release")
			stop()
		}

		// A waiter whose context ends is unsubscribed by itself.
		wctx, cancel := context.WithCancel(ctx)
		if _, _, err := b.Released(wctx, k); err != nil {
			t.Fatal(err)
		}
		cancel()
		waitFor(t, func() bool { return numsub() == 0 }, "a waiter's cancelled context left the subscription")

		if _, _, err := b.Released(wctx, k); !errors.Is(err, context.Canceled) {
			t.Fatalf("Released with a cancelled context = %v", err)
		}
	})
}

// TestReleasedManyWaiters: many goroutines waiting on one key share one
// subscription and are all woken.
func TestReleasedManyWaiters(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	const k, waiters = "notify:many", 200
	var wg sync.WaitGroup
	woken := make(chan struct{}, waiters)
	subscribed := make(chan func(), waiters)
	for range waiters {
		wg.Go(func() {
			ch, stop, err := b.Released(ctx, k)
			if err != nil {
				t.Error(err)
				subscribed <- func() {}
				return
			}
			subscribed <- stop
			select {
			case <-ch:
				woken <- struct{}{}
			case <-time.After(5 * time.Second):
			}
		})
	}
	stops := make([]func(), 0, waiters)
	for range waiters {
		stops = append(stops, <-subscribed)
	}
	releaseOnce(t, b, k)
	wg.Wait()
	for _, stop := range stops {
		stop()
	}
	if len(woken) != waiters {
		t.Fatalf("%d of %d waiters woken", len(woken), waiters)
	}
}

// TestReleasedAfterClose: Close ends subscriptions (goleak in TestMain
// checks that nothing is left running) and refuses new ones.
func TestReleasedAfterClose(t *testing.T) {
	srv := testserver.StartRedis(t)
	eachLibrary(t, srv, func(t *testing.T, ctx context.Context, name string, b *redis.Backend) {
		if _, _, err := b.Released(ctx, "notify:close"); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Released(ctx, "notify:close"); !errors.Is(err, turnstile.ErrClosed) {
			t.Fatalf("Released after Close = %v, want ErrClosed", err)
		}
	})
}

// TestReleasedAcrossRestart: after the server restarts, the subscription
// is restored, its waiters are woken once (a release may have been missed
// while it was down), and later releases reach them again.
func TestReleasedAcrossRestart(t *testing.T) {
	srv := testserver.StartRedis(t)
	eachLibrary(t, srv, func(t *testing.T, ctx context.Context, name string, b *redis.Backend) {
		k := "notify:restart:" + name
		ch, stop, err := b.Released(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		srv.Restart()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatal("waiter not woken when its subscription was restored")
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			tok, ok, err := b.Acquire(ctx, k, "o", time.Minute)
			if err == nil && ok && tok > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("acquire after restart: ok=%v err=%v", ok, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, ok, err := b.Acquire(ctx, k, "waiter", time.Minute); ok || err != nil {
			t.Fatalf("a second owner's acquire: ok=%v err=%v, want refused", ok, err)
		}
		if ok, err := b.Release(ctx, k, "o"); !ok || err != nil {
			t.Fatalf("release: ok=%v err=%v", ok, err)
		}
		awaitNotice(t, ch, "a release after the restart did not reach the waiter")
	})
}

var _ driver.Notifier = (*redis.Backend)(nil)

// releaseOnce takes key and releases it after another owner failed to
// take it meanwhile: a release that sends a notice.
func releaseOnce(t *testing.T, b *redis.Backend, key string) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	if _, ok, err := b.Acquire(ctx, key, "releaser", time.Minute); err != nil || !ok {
		t.Fatalf("acquire %q: ok=%v err=%v", key, ok, err)
	}
	if _, ok, err := b.Acquire(ctx, key, "waiter", time.Minute); err != nil || ok {
		t.Fatalf("a second owner's acquire of %q: ok=%v err=%v, want refused", key, ok, err)
	}
	if ok, err := b.Release(ctx, key, "releaser"); !ok || err != nil {
		t.Fatalf("release %q: ok=%v err=%v", key, ok, err)
	}
}

// awaitNotice fails the test with failure unless ch delivers within five
// seconds.
func awaitNotice(t testing.TB, ch <-chan struct{}, failure string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal(failure)
	}
}

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/idempotency"
)

// call is what one Do returned.
type call struct {
	result   []byte
	replayed bool
	err      error
}

func TestConcurrentDuplicatesFailFast(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		s := k.open(t)
		ctx := ctxFor(t, 30*time.Second)
		key := key(t, "order-1")
		const n = 100
		var runs atomic.Int64
		release := make(chan struct{})
		fn := func(ctx context.Context) ([]byte, error) {
			if runs.Add(1) > 1 {
				return nil, errors.New("fn ran a second time")
			}
			// Hold the claim until every duplicate has answered.
			select {
			case <-release:
				return []byte("receipt"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		start := make(chan struct{})
		calls := make(chan call, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				<-start
				r, rep, err := s.Do(ctx, key, fn)
				calls <- call{r, rep, err}
			})
		}
		close(start)
		for range n - 1 {
			c := <-calls
			if !errors.Is(c.err, idempotency.ErrInProgress) || c.result != nil || c.replayed {
				t.Errorf("duplicate got (%q, %v, %v), want ErrInProgress", c.result, c.replayed, c.err)
			}
		}
		close(release)
		wg.Wait()
		if c := <-calls; c.err != nil || string(c.result) != "receipt" || c.replayed {
			t.Errorf("first call got (%q, %v, %v), want (receipt, false, nil)", c.result, c.replayed, c.err)
		}
		if got := runs.Load(); got != 1 {
			t.Errorf("fn ran %d times, want 1", got)
		}
	})
}

func TestConcurrentDuplicatesWait(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		s := k.open(t, idempotency.WithWait(20*time.Second))
		ctx := ctxFor(t, 30*time.Second)
		key := key(t, "order-1")
		const n = 100
		var runs atomic.Int64
		fn := func(ctx context.Context) ([]byte, error) {
			n := runs.Add(1)
			// A slow request, so that the duplicates arrive while it runs.
			time.Sleep(100 * time.Millisecond)
			return fmt.Appendf(nil, "receipt-%d", n), nil
		}
		start := make(chan struct{})
		calls := make([]call, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				r, rep, err := s.Do(ctx, key, fn)
				calls[i] = call{r, rep, err}
			})
		}
		close(start)
		wg.Wait()
		fresh := 0
		for _, c := range calls {
			if c.err != nil || string(c.result) != "receipt-1" {
				t.Errorf("call got (%q, %v), want receipt-1", c.result, c.err)
			}
			if !c.replayed {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("%d calls ran fn (replayed=false), want 1", fresh)
		}
		if got := runs.Load(); got != 1 {
			t.Errorf("fn ran %d times, want 1", got)
		}
	})
}

func TestLaterDuplicateReplays(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "req")
		// Binary results survive as they are.
		want := []byte{0, 'o', 'k', 0xff, '\n', 0}
		r, rep, err := k.open(t).Do(ctx, key, func(context.Context) ([]byte, error) { return want, nil })
		if err != nil || rep || !bytes.Equal(r, want) {
			t.Fatalf("first Do = (%q, %v, %v), want (%q, false, nil)", r, rep, err, want)
		}
		// Another store on the same data (another instance of the
		// service) replays too.
		for _, s := range []idempotency.Store{k.open(t), k.open(t)} {
			r, rep, err := s.Do(ctx, key, func(context.Context) ([]byte, error) {
				t.Error("fn ran for a later duplicate")
				return nil, nil
			})
			if err != nil || !rep || !bytes.Equal(r, want) {
				t.Errorf("later Do = (%q, %v, %v), want (%q, true, nil)", r, rep, err, want)
			}
		}
	})
}

func TestEmptyResultReplays(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		s := k.open(t)
		ctx := ctxFor(t, 20*time.Second)
		var runs atomic.Int64
		fn := func(context.Context) ([]byte, error) { runs.Add(1); return nil, nil }
		key := key(t, "nil")
		for i, want := range []bool{false, true} {
			r, rep, err := s.Do(ctx, key, fn)
			if err != nil || rep != want || len(r) != 0 {
				t.Errorf("Do #%d = (%q, %v, %v), want (empty, %v, nil)", i+1, r, rep, err, want)
			}
		}
		if runs.Load() != 1 {
			t.Errorf("fn ran %d times, want 1", runs.Load())
		}
	})
}

var errDeclined = errors.New("card declined")

func TestFailureLeavesKeyRetryable(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		s := k.open(t)
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "pay")
		r, rep, err := s.Do(ctx, key, func(context.Context) ([]byte, error) {
			return []byte("partial"), errDeclined
		})
		if !errors.Is(err, errDeclined) || r != nil || rep {
			t.Fatalf("failing Do = (%q, %v, %v), want (nil, false, %v)", r, rep, err, errDeclined)
		}
		// At once, with no wait: the failure left nothing behind.
		var runs atomic.Int64
		fn := func(context.Context) ([]byte, error) { runs.Add(1); return []byte("paid"), nil }
		for i, want := range []bool{false, true} {
			r, rep, err := s.Do(ctx, key, fn)
			if err != nil || rep != want || string(r) != "paid" {
				t.Errorf("retry #%d = (%q, %v, %v), want (paid, %v, nil)", i+1, r, rep, err, want)
			}
		}
		if runs.Load() != 1 {
			t.Errorf("fn ran %d times after the failure, want 1", runs.Load())
		}
	})
}

func TestPanicFreesKey(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		s := k.open(t)
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "p")
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the panic of fn did not reach the caller")
				}
			}()
			_, _, _ = s.Do(ctx, key, func(context.Context) ([]byte, error) { panic("boom") })
		}()
		r, rep, err := s.Do(ctx, key, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
		if err != nil || rep || string(r) != "ok" {
			t.Errorf("Do after a panic = (%q, %v, %v), want (ok, false, nil)", r, rep, err)
		}
	})
}

func TestRetentionExpiry(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		const retention = 100 * time.Millisecond
		s := k.open(t, idempotency.WithRetention(retention))
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "r")
		var runs atomic.Int64
		fn := func(context.Context) ([]byte, error) { return fmt.Appendf(nil, "run-%d", runs.Add(1)), nil }
		if r, rep, err := s.Do(ctx, key, fn); err != nil || rep || string(r) != "run-1" {
			t.Fatalf("first Do = (%q, %v, %v)", r, rep, err)
		}
		time.Sleep(retention + 150*time.Millisecond) // let the result expire
		if r, rep, err := s.Do(ctx, key, fn); err != nil || rep || string(r) != "run-2" {
			t.Errorf("Do after the retention = (%q, %v, %v), want (run-2, false, nil)", r, rep, err)
		}
		if r, rep, err := s.Do(ctx, key, fn); err != nil || !rep || string(r) != "run-2" {
			t.Errorf("Do after that = (%q, %v, %v), want (run-2, true, nil)", r, rep, err)
		}
	})
}

func TestRenewalKeepsClaim(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		const ttl = 500 * time.Millisecond
		s := k.open(t, idempotency.WithClaimTTL(ttl))
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "long")
		var dupErr, cause error
		r, rep, err := s.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
			// Run for several claim TTLs: only renewals keep the claim.
			time.Sleep(3 * ttl)
			_, _, dupErr = s.Do(ctx, key, func(context.Context) ([]byte, error) { return []byte("dup"), nil })
			cause = context.Cause(ctx)
			return []byte("long"), nil
		})
		if err != nil || rep || string(r) != "long" {
			t.Errorf("Do = (%q, %v, %v), want (long, false, nil)", r, rep, err)
		}
		if !errors.Is(dupErr, idempotency.ErrInProgress) {
			t.Errorf("duplicate after %v of a %v claim got %v, want ErrInProgress", 3*ttl, ttl, dupErr)
		}
		if cause != nil {
			t.Errorf("fn's context was cancelled: %v", cause)
		}
	})
}

// startHeld starts a call of Do on key, through a Store of k, whose fn
// runs until release is closed and then returns result and err, and
// returns once fn runs; first receives the call's error.
func startHeld(t *testing.T, ctx context.Context, k kind, key string, result []byte, err error) (release chan struct{}, first chan error) {
	running := make(chan struct{})
	release, first = make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, derr := k.open(t).Do(ctx, key, func(context.Context) ([]byte, error) {
			close(running)
			<-release
			return result, err
		})
		first <- derr
	}()
	<-running
	return release, first
}

func TestWaitGivesUp(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "w")
		release, first := startHeld(t, ctx, k, key, []byte("first"), nil)
		_, _, err := k.open(t, idempotency.WithWait(100*time.Millisecond)).Do(ctx, key, func(context.Context) ([]byte, error) {
			t.Error("fn ran while the first call held the key")
			return nil, nil
		})
		close(release)
		if !errors.Is(err, idempotency.ErrInProgress) {
			t.Errorf("waiting duplicate got %v, want ErrInProgress", err)
		}
		var re *idempotency.RequestError
		if !errors.As(err, &re) || re.Key != key || re.Store != k.name {
			t.Errorf("error %v does not name key %q and store %s", err, key, k.name)
		}
		if err := <-first; err != nil {
			t.Errorf("first call: %v", err)
		}
	})
}

func TestWaiterRunsWhenFirstFails(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "w")
		release, first := startHeld(t, ctx, k, key, nil, errDeclined)
		waiter := make(chan call, 1)
		go func() {
			r, rep, err := k.open(t, idempotency.WithWait(10*time.Second)).Do(ctx, key, func(context.Context) ([]byte, error) {
				return []byte("second"), nil
			})
			waiter <- call{r, rep, err}
		}()
		close(release)
		if err := <-first; !errors.Is(err, errDeclined) {
			t.Errorf("first call got %v, want %v", err, errDeclined)
		}
		if c := <-waiter; c.err != nil || c.replayed || string(c.result) != "second" {
			t.Errorf("waiter got (%q, %v, %v), want (second, false, nil)", c.result, c.replayed, c.err)
		}
	})
}

func TestCancelWhileWaiting(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "c")
		release, first := startHeld(t, ctx, k, key, []byte("first"), nil)
		wctx, cancel := context.WithCancelCause(ctx)
		waiter := make(chan error, 1)
		go func() {
			_, _, err := k.open(t, idempotency.WithWait(time.Minute)).Do(wctx, key, func(context.Context) ([]byte, error) {
				return nil, errors.New("fn ran while the first call held the key")
			})
			waiter <- err
		}()
		errShutdown := errors.New("server shutting down")
		cancel(errShutdown)
		if err := <-waiter; !errors.Is(err, context.Canceled) || !errors.Is(err, errShutdown) {
			t.Errorf("cancelled waiter got %v, want context.Canceled and its cause", err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Errorf("first call: %v", err)
		}
	})
}

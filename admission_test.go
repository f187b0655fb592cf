package turnstile_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// slots admits up to n acquisitions, then refuses until more are added.
// It records which callers (a context value) it admitted, in order.
type slots struct {
	mu       sync.Mutex
	left     int
	asks     atomic.Int32
	err      error
	admitted []int
}

type callerID struct{}

func (s *slots) Admit(ctx context.Context, key string) (bool, time.Duration, error) {
	s.asks.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false, 0, s.err
	}
	if s.left > 0 {
		s.left--
		if id, ok := ctx.Value(callerID{}).(int); ok {
			s.admitted = append(s.admitted, id)
		}
		return true, 0, nil
	}
	return false, 2 * time.Millisecond, nil
}

// batchSlots admits several at once; the Client tells who by order.
type batchSlots struct{ *slots }

func (b batchSlots) AdmitN(ctx context.Context, key string, n int) (int, time.Duration, error) {
	b.asks.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	k := min(n, b.left)
	b.left -= k
	if k == 0 {
		return 0, 2 * time.Millisecond, nil
	}
	return k, 0, nil
}

func (s *slots) add(n int) {
	s.mu.Lock()
	s.left += n
	s.mu.Unlock()
}

func TestAdmissionRejectsOverLimit(t *testing.T) {
	ctx := context.Background()
	s := &slots{left: 1}
	c := newClient(t, memory.New(), turnstile.WithAdmission(s, turnstile.RejectOverLimit))
	l, err := c.TryAcquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if _, err := c.Acquire(ctx, "a"); !errors.Is(err, turnstile.ErrRateLimited) {
		t.Fatalf("over the limit: %v, want ErrRateLimited", err)
	}
	s.err = errors.New("limiter down")
	if _, err := c.Acquire(ctx, "a"); err == nil || errors.Is(err, turnstile.ErrRateLimited) {
		t.Fatalf("limiter error: %v", err)
	}
	for _, bad := range []turnstile.Option{turnstile.WithAdmission(nil, turnstile.RejectOverLimit), turnstile.WithAdmission(s, 0)} {
		if _, err := turnstile.New(memory.New(), bad); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("bad admission option: %v", err)
		}
	}
}

// TestAdmissionQueuesInOrder: over-limit callers wait in line, learn
// their place, and are admitted first come first served — one by one, or
// (BatchAdmission) the front of the line at once.
func TestAdmissionQueuesInOrder(t *testing.T) {
	for _, batch := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := &slots{}
		var a turnstile.Admission = s
		if batch {
			a = batchSlots{s}
		}
		c := newClient(t, memory.New(), turnstile.WithAdmission(a, turnstile.QueueOverLimit), patient)
		const n = 20
		firstPos := make([]atomic.Int32, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				pos := turnstile.WithQueuePosition(func(p int) { firstPos[i].CompareAndSwap(0, int32(p)) })
				l, err := c.Acquire(context.WithValue(ctx, callerID{}, i), "q", pos)
				if err != nil {
					t.Error(err)
					return
				}
				_ = l.Release(ctx)
			})
			for firstPos[i].Load() == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		for i := range n {
			if p := firstPos[i].Load(); p != int32(i+1) {
				t.Fatalf("batch %v: caller %d was first told position %d, want %d", batch, i, p, i+1)
			}
		}
		asked := s.asks.Load()
		s.add(n)
		wg.Wait()
		if batch {
			// The head asked for the whole line once the slots were there.
			if extra := s.asks.Load() - asked; extra > 2 {
				t.Fatalf("batch: %d asks to admit a line of %d", extra, n)
			}
		} else {
			for i, v := range s.admitted {
				if v != i {
					t.Fatalf("admitted in order %v, want arrival order", s.admitted)
				}
			}
			if len(s.admitted) != n {
				t.Fatalf("%d admitted, want %d", len(s.admitted), n)
			}
		}
	}
	// Not admitted within the Backoff's total wait: ErrRateLimited.
	c := newClient(t, memory.New(), turnstile.WithAdmission(&slots{}, turnstile.QueueOverLimit))
	short := turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: time.Millisecond, MaxRetries: 5})
	if _, err := c.Acquire(context.Background(), "q", short); !errors.Is(err, turnstile.ErrRateLimited) {
		t.Fatalf("never admitted: %v, want ErrRateLimited", err)
	}
}

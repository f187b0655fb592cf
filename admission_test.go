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
type slots struct {
	mu   sync.Mutex
	left int
	asks atomic.Int32
	err  error
}

func (s *slots) Admit(ctx context.Context, key string) (bool, time.Duration, error) {
	s.asks.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false, 0, s.err
	}
	if s.left > 0 {
		s.left--
		return true, 0, nil
	}
	return false, 2 * time.Millisecond, nil
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
// their place, and are admitted first come first served.
func TestAdmissionQueuesInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &slots{}
	c := newClient(t, memory.New(), turnstile.WithAdmission(s, turnstile.QueueOverLimit), patient)
	const n = 10
	var mu sync.Mutex
	var order []int
	firstPos := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			pos := turnstile.WithQueuePosition(func(p int) { firstPos[i].CompareAndSwap(0, int32(p)) })
			l, err := c.Acquire(ctx, "q", pos)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = l.Release(ctx)
		})
		for firstPos[i].Load() == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	for i := range n {
		if p := firstPos[i].Load(); p != int32(i+1) {
			t.Fatalf("caller %d was first told position %d, want %d", i, p, i+1)
		}
	}
	s.add(n)
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("admitted in order %v, want arrival order", order)
		}
	}
	// Not admitted within the Backoff's total wait: ErrRateLimited.
	short := turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: time.Millisecond, MaxRetries: 5})
	if _, err := c.Acquire(ctx, "q", short); !errors.Is(err, turnstile.ErrRateLimited) {
		t.Fatalf("never admitted: %v, want ErrRateLimited", err)
	}
}

package turnstile_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The defects of waiting and observing: an observer that stops reporting
// a leader, and waiters that Close leaves waiting (core_defects_test.go
// has the handoffs').

// TestDefectObserveStuckAfterMissedAnswer: one answer that shows no
// leader while the leader leads (a Redlock node that misses one
// Inspect) must not hide the same leader from Observe for good.
func TestDefectObserveStuckAfterMissedAnswer(t *testing.T) {
	ctx := testCtx(t)
	s := newRoomStore()
	octx, stop := context.WithCancel(ctx)
	defer stop()
	const stale, after = 3, 100
	s.inspect = func(n int, st driver.LockState) driver.LockState {
		switch {
		case n == stale:
			return driver.LockState{Key: st.Key, Waiters: -1}
		case n >= stale+after:
			stop()
		}
		return st
	}
	c := newClient(t, s, turnstile.WithTTL(8*time.Second))
	e := mustElection(t, c, "lead")
	lead := mustCampaign(t, ctx, e, "a")
	defer lead.Resign(ctx)
	var reports []turnstile.Leader
	for ld, err := range e.Observe(octx, time.Millisecond) {
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, ld)
	}
	if n := len(reports); n == 0 || reports[n-1].Owner != lead.Lease().Owner() {
		t.Fatalf("Observe reported %v while %s (term %d) led throughout, and %d answers after the one that missed it showed it leading",
			reports, lead.Value(), lead.Term(), after)
	}
}

// TestDefectCloseLeavesWaitersInLine: Close must end the calls that wait
// in the Client's line: Campaign returns ErrClosed (as documented), and
// never a leadership that has already ended.
func TestDefectCloseLeavesWaitersInLine(t *testing.T) {
	const bound = 5 * time.Second // Close wakes waiters at once; this is generous
	waitOut := func(t *testing.T, what string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			if !errors.Is(err, turnstile.ErrClosed) {
				t.Fatalf("%s after Close: %v, want ErrClosed", what, err)
			}
		case <-time.After(bound):
			t.Fatalf("%s still waiting %v after Close", what, bound)
		}
	}
	waiting := func() (turnstile.Option, chan struct{}) {
		ch := make(chan struct{}, 1)
		return turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
			if e.Type == turnstile.EventWaiting {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		})), ch
	}
	campaign := func(ctx context.Context, e *turnstile.Election) <-chan error {
		done := make(chan error, 1)
		go func() {
			l, err := e.Campaign(ctx, "b")
			if err == nil {
				err = fmt.Errorf("won leadership (term %d, context ended: %v)", l.Term(), context.Cause(l.Context()))
			}
			done <- err
		}()
		return done
	}

	t.Run("CampaignBehindOwnLeader", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel() // ends a Campaign that Close left waiting
		c, err := turnstile.New(newRoomStore(), turnstile.WithTTL(8*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		opt, isWaiting := waiting()
		e := mustElection(t, c, "lead", opt)
		if _, err := e.Campaign(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		done := campaign(ctx, e)
		<-isWaiting
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		waitOut(t, "Campaign", done)
	})

	t.Run("AcquireBehindOwnLease", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		c, err := turnstile.New(newRoomStore(), turnstile.WithTTL(8*time.Second), fast)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		w := inLine(t, ctx, c, "k")
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			r := <-w
			if r.err == nil {
				r.err = fmt.Errorf("acquired token %d (context ended: %v)", r.l.Token(), context.Cause(r.l.Context()))
			}
			done <- r.err
		}()
		waitOut(t, "Acquire", done)
	})

	t.Run("CampaignBehindOtherLeader", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		s := newRoomStore()
		c, err := turnstile.New(s, turnstile.WithTTL(8*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		other := newClient(t, s, turnstile.WithTTL(8*time.Second))
		oe := mustElection(t, other, "lead")
		leader := mustCampaign(t, ctx, oe, "a")
		opt, isWaiting := waiting()
		e := mustElection(t, c, "lead", turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 5 * time.Millisecond, MaxRetries: -1}), opt)
		done := campaign(ctx, e)
		<-isWaiting
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := leader.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		waitOut(t, "Campaign", done)
		if ld, err := oe.Leader(ctx); err != nil || ld.Elected {
			t.Fatalf("after Close and the other leader's resignation the store shows %v (%v): the closed Client's campaign took the lock", ld, err)
		}
	})
}

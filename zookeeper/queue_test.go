package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestAcquireWaitFIFO: three waiters that join the queue in turn get the
// lock in that order, with increasing tokens.
func TestAcquireWaitFIFO(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	b := dial(t)
	op := rawConn(t)
	key := "fifo/" + t.Name()
	tok0, ok, err := b.Acquire(ctx, key, "holder", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	type grant struct {
		who   int
		token uint64
		err   error
	}
	grants := make(chan grant, 3)
	for i := range 3 {
		w := dial(t)
		go func() {
			tok, err := w.AcquireWait(ctx, key, fmt.Sprint("waiter-", i), 10*time.Second)
			grants <- grant{i, tok, err}
			if err == nil {
				time.Sleep(20 * time.Millisecond) // anyone out of turn would overtake now
				_, _ = w.Release(ctx, key, fmt.Sprint("waiter-", i))
			}
		}()
		// Wait until waiter i is in the queue before the next one joins.
		for len(queue(t, op, b.Dir(key))) != i+2 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if ok, err := b.Release(ctx, key, "holder"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	last := tok0
	for want := range 3 {
		g := <-grants
		if g.err != nil {
			t.Fatalf("waiter %d: %v", g.who, g.err)
		}
		if g.who != want {
			t.Fatalf("waiter %d got the lock in turn %d", g.who, want)
		}
		if g.token <= last {
			t.Fatalf("waiter %d token %d not greater than %d", g.who, g.token, last)
		}
		last = g.token
	}
}

// TestAcquireWaitCancelLeavesQueue: a waiter whose context ends returns
// the context's error at once and its node leaves the queue, so the next
// waiter is not held up behind it.
func TestAcquireWaitCancelLeavesQueue(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	b := dial(t)
	op := rawConn(t)
	key := "cancel/" + t.Name()
	if _, ok, err := b.Acquire(ctx, key, "holder", 10*time.Second); err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := dial(t).AcquireWait(wctx, key, "quitter", 10*time.Second)
		done <- err
	}()
	for len(queue(t, op, b.Dir(key))) != 2 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("AcquireWait after cancel = %v, want context.Canceled", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(queue(t, op, b.Dir(key))) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("queue after cancel: %v, want the holder only", queue(t, op, b.Dir(key)))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := b.Release(ctx, key, "holder"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := dial(t).Acquire(ctx, key, "next", time.Second); err != nil || !ok {
		t.Fatalf("Acquire after the quitter left = %v, %v", ok, err)
	}
}

// TestTryAcquireDoesNotQueue: a refused Acquire leaves no node behind.
func TestTryAcquireDoesNotQueue(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	b := dial(t)
	op := rawConn(t)
	key := "noqueue/" + t.Name()
	if _, ok, err := b.Acquire(ctx, key, "holder", 10*time.Second); err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	if _, ok, err := dial(t).Acquire(ctx, key, "other", 10*time.Second); ok || err != nil {
		t.Fatalf("Acquire of a held key = %v, %v; want false, nil", ok, err)
	}
	if q := queue(t, op, b.Dir(key)); len(q) != 1 {
		t.Fatalf("queue = %v, want the holder only", q)
	}
}

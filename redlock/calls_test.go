package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestExtendNeedsQuorum: renewals count like grants.
func TestExtendNeedsQuorum(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, nodes := cluster(t, 3, redlock.WithWaitAll()) // so that every node saw the acquisition when it returns
	if _, ok, err := b.Acquire(ctx, "k", "a", time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	nodes[0].set(func(f *flaky) { f.down = true })
	if ok, err := b.Extend(ctx, "k", "a", time.Minute); !ok || err != nil {
		t.Fatalf("extend with 1 of 3 down: ok=%v err=%v", ok, err)
	}
	nodes[1].set(func(f *flaky) { f.down = true })
	if ok, err := b.Extend(ctx, "k", "a", time.Minute); ok || !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("extend with 2 of 3 down: ok=%v err=%v; want ErrNoQuorum", ok, err)
	}
	nodes[0].set(func(f *flaky) { f.down = false })
	nodes[1].set(func(f *flaky) { f.down = false })
	nodes[1].mem.Evict("k")
	nodes[2].mem.Evict("k")
	if ok, err := b.Extend(ctx, "k", "a", time.Minute); ok || err != nil {
		t.Fatalf("extend when 2 of 3 nodes lost the lock: ok=%v err=%v; want false, nil", ok, err)
	}
	if ok, err := b.Release(ctx, "k", "a"); ok || err != nil {
		t.Fatalf("release when only 1 of 3 nodes holds the lock: ok=%v err=%v; want false, nil", ok, err)
	}
}

// TestExtendMany: the batch goes to every node at once, batching on nodes
// that can, one by one on those that cannot; each request counts alone.
func TestExtendMany(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	batching := []driver.Backend{memory.New(), memory.New(), newFlaky("one-by-one")}
	b, err := redlock.New(batching, redlock.WithWaitAll()) // every node saw each acquisition when it returns
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, k := range []string{"a", "b"} {
		if _, ok, err := b.Acquire(ctx, k, "o", time.Minute); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	batching[0].(*memory.Backend).Evict("b")
	batching[1].(*memory.Backend).Evict("b")
	res := b.ExtendMany(ctx, []driver.ExtendRequest{
		{Key: "a", Owner: "o", TTL: time.Minute},
		{Key: "b", Owner: "o", TTL: time.Minute},
		{Key: "a", Owner: "other", TTL: time.Minute},
	})
	want := []bool{true, false, false}
	for i, r := range res {
		if r.OK != want[i] || r.Err != nil {
			t.Errorf("request %d: %+v, want OK=%v", i, r, want[i])
		}
	}
	if res := b.ExtendMany(ctx, nil); len(res) != 0 {
		t.Errorf("empty batch: %v", res)
	}
}

// TestRaiseFenceQuorum: the composite is itself a Fencer.
func TestRaiseFenceQuorum(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, nodes := cluster(t, 3)
	tok, ok, err := b.Acquire(ctx, "k", "a", time.Minute)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := b.RaiseFence(ctx, "k", "a", tok+1000); !ok || err != nil {
		t.Fatalf("RaiseFence: ok=%v err=%v", ok, err)
	}
	if ok, err := b.RaiseFence(ctx, "k", "b", tok+2000); ok || err != nil {
		t.Fatalf("RaiseFence by a non-owner: ok=%v err=%v; want false, nil", ok, err)
	}
	nodes[0].set(func(f *flaky) { f.down = true })
	nodes[1].set(func(f *flaky) { f.down = true })
	if _, err := b.RaiseFence(ctx, "k", "a", tok+3000); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("RaiseFence with 2 of 3 down = %v, want ErrNoQuorum", err)
	}
}

func TestClose(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	closed := 0
	nodes := []driver.Backend{closeCounter{memory.New(), &closed}, closeCounter{memory.New(), &closed}, closeCounter{memory.New(), &closed}}
	b, err := redlock.New(nodes, redlock.WithCloseNodes())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil || closed != 3 {
		t.Fatalf("Close = %v, %d nodes closed; want nil, 3", err, closed)
	}
	if err := b.Close(); err != nil || closed != 3 {
		t.Fatalf("second Close = %v, %d nodes closed", err, closed)
	}
	if _, _, err := b.Acquire(ctx, "k", "a", time.Minute); !errors.Is(err, turnstile.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if _, err := b.Release(ctx, "k", "a"); !errors.Is(err, turnstile.ErrClosed) {
		t.Fatalf("Release after Close = %v, want ErrClosed", err)
	}
	if r := b.ExtendMany(ctx, []driver.ExtendRequest{{Key: "k", Owner: "a", TTL: time.Minute}}); !errors.Is(r[0].Err, turnstile.ErrClosed) {
		t.Fatalf("ExtendMany after Close = %+v, want ErrClosed", r)
	}

	b2, err := redlock.New([]driver.Backend{closeCounter{memory.New(), &closed}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Close(); err != nil || closed != 3 {
		t.Fatalf("without WithCloseNodes Close closed a node (%d)", closed)
	}
}

type closeCounter struct {
	*memory.Backend
	n *int
}

func (c closeCounter) Close() error {
	*c.n++
	return nil
}

func TestName(t *testing.T) {
	b, _ := cluster(t, 3)
	if got, want := b.Name(), "redlock(mem1, mem2, mem3)"; got != want {
		t.Fatalf("Name() = %q, want %q", got, want)
	}
}

// TestCancelled: a cancelled context fails the call with an error that
// matches context.Canceled.
func TestCancelled(t *testing.T) {
	b, nodes := cluster(t, 3)
	for _, f := range nodes {
		f.set(func(f *flaky) { f.delay = time.Second })
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(5*time.Millisecond, cancel)
	_, ok, err := b.Acquire(ctx, "k", "a", 30*time.Second)
	if ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire cancelled midway: ok=%v err=%v; want context.Canceled", ok, err)
	}
	if _, _, err := b.Acquire(ctx, "k", "a", 30*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context = %v", err)
	}
}

// TestReleasedNeedsANotifier: release notices come from the nodes; a
// Redlock of nodes that cannot tell releases says so.
func TestReleasedNeedsANotifier(t *testing.T) {
	b, _ := cluster(t, 3)
	if _, _, err := b.Released(ctxFor(t, time.Second), "k"); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("Released over nodes without notices = %v, want ErrInvalidOption", err)
	}
}

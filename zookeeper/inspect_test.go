package zookeeper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// waitQueue waits until key's directory holds n nodes.
func waitQueue(t *testing.T, dir string, n int) {
	t.Helper()
	op := rawConn(t)
	deadline := time.Now().Add(10 * time.Second)
	for len(queue(t, op, dir)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d nodes, want %d", dir, len(queue(t, op, dir)), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInspect(t *testing.T) {
	b := dial(t)

	t.Run("Free", func(t *testing.T) {
		st, err := b.Inspect(ctxFor(t, 10*time.Second), "inspect/never")
		if err != nil || st.Held || len(st.Holders) != 0 || st.Waiters != 0 || st.Token != 0 || st.Key != "inspect/never" {
			t.Fatalf("Inspect of a free key = %+v, %v; want free, no holders, no waiters, token 0", st, err)
		}
	})

	t.Run("HeldAndQueued", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		const k = "inspect/held by/ünïcode"
		tok, ok, err := b.Acquire(ctx, k, "alice@host/1", 10*time.Second)
		if err != nil || !ok {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		st, err := b.Inspect(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		h := st.Holders
		if !st.Held || len(h) != 1 || h[0].Owner != "alice@host/1" || h[0].Token != tok || h[0].TTL != -1 || st.Token < tok || st.Waiters != 0 {
			t.Fatalf("Inspect of a held key = %+v; want alice@host/1 with token %d, TTL -1, 0 waiters", st, tok)
		}

		wctx, cancel := context.WithCancel(ctx)
		errs := make(chan error, 2)
		for _, o := range []string{"bob", "carol"} {
			w := dial(t)
			go func() { _, err := w.AcquireWait(wctx, k, o, 10*time.Second); errs <- err }()
		}
		waitQueue(t, b.Dir(k), 3)
		st, err = b.Inspect(ctx, k)
		if err != nil || st.Waiters != 2 || st.Holders[0].Owner != "alice@host/1" {
			t.Fatalf("Inspect with two queued = %+v, %v; want alice holding, 2 waiters", st, err)
		}
		cancel()
		for range 2 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled waiter: %v", err)
			}
		}
		if ok, err := b.Release(ctx, k, "alice@host/1"); !ok || err != nil {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		waitQueue(t, b.Dir(k), 0)
		if st, err := b.Inspect(ctx, k); err != nil || st.Held || st.Waiters != 0 {
			t.Fatalf("Inspect after release = %+v, %v; want free, no waiters", st, err)
		}
	})

	t.Run("List", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		toks := map[string]uint64{}
		for _, k := range []string{"ls/a", "ls/b", "ls/c", "ls%", "lsx", "other"} {
			tok, ok, err := b.Acquire(ctx, k, "owner-"+k, 10*time.Second)
			if err != nil || !ok {
				t.Fatalf("Acquire %q = %v, %v", k, ok, err)
			}
			toks[k] = tok
		}
		// A released key's directory may linger; it is not listed.
		if _, ok, err := b.Acquire(ctx, "ls/released", "x", 10*time.Second); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := b.Release(ctx, "ls/released", "x"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		all, more, err := b.List(ctx, "ls/", 10)
		if err != nil || more || len(all) != 3 {
			t.Fatalf("List(ls/, 10) = %+v, more=%v, %v; want 3 states, no more", all, more, err)
		}
		for i, k := range []string{"ls/a", "ls/b", "ls/c"} {
			st := all[i]
			if st.Key != k || !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != "owner-"+k || st.Holders[0].Token != toks[k] || st.Waiters != 0 {
				t.Fatalf("List entry %d = %+v; want %s held by owner-%s with token %d", i, st, k, k, toks[k])
			}
		}
		page, more, err := b.List(ctx, "ls/", 2)
		if err != nil || !more || len(page) != 2 || page[0].Key != "ls/a" || page[1].Key != "ls/b" {
			t.Fatalf("List(ls/, 2) = %+v, more=%v, %v; want ls/a, ls/b and more", page, more, err)
		}
		if got, more, err := b.List(ctx, "ls", 10); err != nil || more || len(got) != 5 {
			t.Fatalf("List(ls, 10) = %+v, more=%v, %v; want 5 (ls%%, ls/a, ls/b, ls/c, lsx)", got, more, err)
		}
		if got, more, err := b.List(ctx, "ls%", 10); err != nil || more || len(got) != 1 || got[0].Key != "ls%" {
			t.Fatalf("List(ls%%, 10) = %+v, more=%v, %v; want ls%% alone", got, more, err)
		}
		if got, more, err := b.List(ctx, "nothing-here/", 10); err != nil || more || len(got) != 0 {
			t.Fatalf("List of an empty prefix = %+v, %v, %v", got, more, err)
		}
		for _, limit := range []int{0, -1} {
			if _, _, err := b.List(ctx, "ls/", limit); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Fatalf("List with limit %d: %v, want ErrInvalidOption", limit, err)
			}
		}
	})
}

func TestForceRelease(t *testing.T) {
	t.Run("WakesWaiter", func(t *testing.T) {
		ctx := ctxFor(t, 60*time.Second)
		b := dial(t)
		const k = "force/waiter"
		// Held for a minute: only the forced release can let the waiter in.
		tok, ok, err := b.Acquire(ctx, k, "stuck", time.Minute)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		w := dial(t)
		type res struct {
			tok uint64
			err error
		}
		got := make(chan res, 1)
		go func() {
			tok, err := w.AcquireWait(ctx, k, "waiter", 10*time.Second)
			got <- res{tok, err}
		}()
		waitQueue(t, b.Dir(k), 2)
		st, err := dial(t).ForceRelease(ctx, k)
		if err != nil || !st.Held || st.Holders[0].Owner != "stuck" || st.Holders[0].Token != tok || st.Waiters != 1 {
			t.Fatalf("ForceRelease = %+v, %v; want stuck with token %d and 1 waiter", st, err, tok)
		}
		select {
		case r := <-got:
			if r.err != nil || r.tok <= st.Token {
				t.Fatalf("waiter got %d, %v; want a token above the floor %d", r.tok, r.err, st.Token)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the queued waiter was not woken by the forced release")
		}
		if ok, err := b.Extend(ctx, k, "stuck", time.Minute); ok || err != nil {
			t.Fatalf("Extend by the removed holder = %v, %v; want false", ok, err)
		}
		if ok, err := w.Release(ctx, k, "waiter"); !ok || err != nil {
			t.Fatal(ok, err)
		}
	})

	t.Run("Free", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		b := dial(t)
		st, err := b.ForceRelease(ctx, "force/free")
		if err != nil || st.Held || len(st.Holders) != 0 {
			t.Fatalf("ForceRelease of a free key = %+v, %v; want not held", st, err)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		b := dial(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := b.ForceRelease(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("ForceRelease with a cancelled context: %v", err)
		}
		if _, err := b.Inspect(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Inspect with a cancelled context: %v", err)
		}
		if _, _, err := b.List(ctx, "", 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("List with a cancelled context: %v", err)
		}
	})
}

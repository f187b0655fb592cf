package zookeeper_test

import (
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/inspecttest"
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

		inspecttest.TwoWaiting(t, ctx, b, k, "alice@host/1", func() inspecttest.Waiter { return dial(t) }, func() { waitQueue(t, b.Dir(k), 3) })
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
		toks := inspecttest.HoldEach(t, ctx, b, "ls/a", "ls/b", "ls/c", "ls%", "lsx", "other")
		// A released key's directory may linger; it is not listed.
		inspecttest.HoldReleased(t, ctx, b, "ls/released")
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
		inspecttest.FirstPage(t, ctx, b)
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
		b := dial(t)
		const k = "force/waiter"
		inspecttest.WakesWaiter(t, k, b, dial(t), dial(t), func() { waitQueue(t, b.Dir(k), 2) })
	})

	t.Run("Free", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		b := dial(t)
		st, err := b.ForceRelease(ctx, "force/free")
		if err != nil || st.Held || len(st.Holders) != 0 {
			t.Fatalf("ForceRelease of a free key = %+v, %v; want not held", st, err)
		}
	})

	t.Run("Cancelled", func(t *testing.T) { inspecttest.Cancelled(t, dial(t)) })
}

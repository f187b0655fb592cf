package etcd_test

import (
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/inspecttest"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func TestInspect(t *testing.T) {
	srv, b := startBackend(t)
	raw := rawClient(t, srv)

	t.Run("Free", func(t *testing.T) {
		st, err := b.Inspect(ctxFor(t, 10*time.Second), "inspect-never")
		if err != nil || st.Held || len(st.Holders) != 0 || st.Waiters != 0 || st.Key != "inspect-never" {
			t.Fatalf("Inspect of a free key = %+v, %v; want free, no holders, 0 waiters", st, err)
		}
	})

	t.Run("HeldAndQueued", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		const k = "inspect-held"
		tok, ok, err := b.Acquire(ctx, k, "alice", 10*time.Second)
		if err != nil || !ok {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		st, err := b.Inspect(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != "alice" || st.Holders[0].Token != tok || st.Token != tok || st.Waiters != 0 {
			t.Fatalf("Inspect of a held key = %+v; want alice with token %d, 0 waiters", st, tok)
		}
		// The lease was granted with 10 s; some of it has passed, and the
		// etcd leader rounds down to whole seconds.
		if ttl := st.Holders[0].TTL; ttl <= 0 || ttl > 10*time.Second {
			t.Fatalf("TTL left = %v, want in (0, 10s]", ttl)
		}

		// Two waiters in key's queue.
		inspecttest.TwoWaiting(t, ctx, b, k, "alice", func() inspecttest.Waiter { return b }, func() { waitQueued(t, raw, k, 2) })
		if ok, err := b.Release(ctx, k, "alice"); !ok || err != nil {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		// A cancelled waiter's queue key is deleted in the background,
		// after its AcquireWait has returned.
		waitQueued(t, raw, k, 0)
		if st, err := b.Inspect(ctx, k); err != nil || st.Held || st.Waiters != 0 {
			t.Fatalf("Inspect after release = %+v, %v; want free, no waiters", st, err)
		}
	})

	t.Run("List", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		toks := inspecttest.HoldEach(t, ctx, b, "ls/a", "ls/b", "ls/c", "lsx", "other")
		// A released key is not listed.
		inspecttest.HoldReleased(t, ctx, b, "ls/released")
		all, more, err := b.List(ctx, "ls/", 10)
		if err != nil || more || len(all) != 3 {
			t.Fatalf("List(ls/, 10) = %+v, more=%v, %v; want 3 states, no more", all, more, err)
		}
		for i, k := range []string{"ls/a", "ls/b", "ls/c"} {
			st := all[i]
			if st.Key != k || !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != "owner-"+k ||
				st.Holders[0].Token != toks[k] || st.Holders[0].TTL <= 0 || st.Holders[0].TTL > 10*time.Second || st.Waiters != 0 {
				t.Fatalf("List entry %d = %+v; want %s held by owner-%s with token %d", i, st, k, k, toks[k])
			}
		}
		inspecttest.FirstPage(t, ctx, b)
		if got, more, err := b.List(ctx, "ls", 10); err != nil || more || len(got) != 4 {
			t.Fatalf("List(ls, 10) = %d states, more=%v, %v; want 4 (ls/a, ls/b, ls/c, lsx)", len(got), more, err)
		}
		if got, more, err := b.List(ctx, "nothing-here/", 10); err != nil || more || len(got) != 0 {
			t.Fatalf("List of an empty prefix = %+v, %v, %v", got, more, err)
		}
		if got, _, err := b.List(ctx, "", 1000); err != nil || len(got) < 5 {
			t.Fatalf("List of every key = %d states, %v; want at least the 5 held here", len(got), err)
		}
		for _, limit := range []int{0, -1} {
			if _, _, err := b.List(ctx, "ls/", limit); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Fatalf("List with limit %d: %v, want ErrInvalidOption", limit, err)
			}
		}
	})
}

func TestForceRelease(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)

	t.Run("WakesWaiter", func(t *testing.T) {
		b := dial(t, srv)
		const k = "force-waiter"
		inspecttest.WakesWaiter(t, k, b, b, dial(t, srv), func() { waitQueued(t, raw, k, 1) })
	})

	t.Run("Free", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		b := dial(t, srv)
		st, err := b.ForceRelease(ctx, "force-free")
		if err != nil || st.Held || len(st.Holders) != 0 || st.Token == 0 {
			t.Fatalf("ForceRelease of a free key = %+v, %v; want not held, a floor", st, err)
		}
		tok, ok, err := b.Acquire(ctx, "force-free", "a", 5*time.Second)
		if err != nil || !ok || tok <= st.Token {
			t.Fatalf("Acquire = %d, %v, %v; want a token above %d", tok, ok, err, st.Token)
		}
	})

	t.Run("Cancelled", func(t *testing.T) { inspecttest.Cancelled(t, dial(t, srv)) })
}

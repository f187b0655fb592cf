package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/mysql"
)

func TestInspect(t *testing.T) {
	srv := testserver.StartMySQL(t)
	b := dial(t, srv)

	t.Run("Free", func(t *testing.T) {
		st, err := b.Inspect(ctxFor(t, 10*time.Second), "inspect-never")
		if err != nil || st.Held || len(st.Holders) != 0 || st.Waiters != -1 || st.Token != 0 || st.Key != "inspect-never" {
			t.Fatalf("Inspect of a key never locked = %+v, %v; want free, token 0, waiters -1", st, err)
		}
	})

	t.Run("HeldThenReleased", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		const k = "inspect-held"
		tok, ok, err := b.Acquire(ctx, k, "alice", 10*time.Second)
		if err != nil || !ok {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		st, err := dial(t, srv).Inspect(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		h := st.Holders
		if !st.Held || len(h) != 1 || h[0].Owner != "alice" || h[0].Token != tok || st.Token != tok || st.Waiters != -1 {
			t.Fatalf("Inspect of a held key = %+v; want alice with token %d, waiters -1", st, tok)
		}
		if h[0].TTL <= 0 || h[0].TTL > 10*time.Second {
			t.Fatalf("TTL left = %v, want in (0, 10s]", h[0].TTL)
		}
		if ok, err := b.Release(ctx, k, "alice"); !ok || err != nil {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		// The row stays, and with it the last token issued.
		if st, err := b.Inspect(ctx, k); err != nil || st.Held || len(st.Holders) != 0 || st.Token != tok {
			t.Fatalf("Inspect after release = %+v, %v; want free with token %d", st, err, tok)
		}
	})

	t.Run("List", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		long := "ls/" + strings.Repeat("x", 70) // stored under a hashed name
		toks := map[string]uint64{}
		for _, k := range []string{"ls/a", "ls/b", "ls/c", "ls/ü", "ls/\xff", "ls0", "lsx", "other", "ls_%", long} {
			tok, ok, err := b.Acquire(ctx, k, "owner-"+k, 10*time.Second)
			if err != nil || !ok {
				t.Fatalf("Acquire %q = %v, %v", k, ok, err)
			}
			toks[mysql.LockName(k)] = tok
		}
		// Released and expired rows stay in the table; they are not listed.
		if _, ok, err := b.Acquire(ctx, "ls/released", "x", 10*time.Second); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := b.Release(ctx, "ls/released", "x"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if _, ok, err := b.Acquire(ctx, "ls/expired", "x", 20*time.Millisecond); !ok || err != nil {
			t.Fatal(ok, err)
		}
		time.Sleep(100 * time.Millisecond)

		want := []string{"ls/a", "ls/b", "ls/c", "ls/ü", "ls/\xff"}
		all, more, err := b.List(ctx, "ls/", 10)
		if err != nil || more || len(all) != len(want) {
			t.Fatalf("List(ls/, 10) = %+v, more=%v, %v; want %q, no more", all, more, err, want)
		}
		for i, k := range want {
			st := all[i]
			if st.Key != k || !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != "owner-"+k || st.Holders[0].Token != toks[k] ||
				st.Token != toks[k] || st.Holders[0].TTL <= 0 || st.Holders[0].TTL > 10*time.Second || st.Waiters != -1 {
				t.Fatalf("List entry %d = %+v; want %q held by owner-%s with token %d", i, st, k, k, toks[k])
			}
		}
		page, more, err := b.List(ctx, "ls/", 2)
		if err != nil || !more || len(page) != 2 || page[0].Key != "ls/a" || page[1].Key != "ls/b" {
			t.Fatalf("List(ls/, 2) = %+v, more=%v, %v; want ls/a, ls/b and more", page, more, err)
		}
		if page, more, err := b.List(ctx, "ls/", 5); err != nil || more || len(page) != 5 {
			t.Fatalf("List(ls/, 5) of 5 = %d states, more=%v, %v; want 5, no more", len(page), more, err)
		}
		for prefix, n := range map[string]int{"ls": 8, "ls_": 1, "ls_%": 1, "ls/\xff": 1, "ls/ü": 1, "nothing-here/": 0} {
			got, more, err := b.List(ctx, prefix, 100)
			if err != nil || more || len(got) != n {
				t.Fatalf("List(%q, 100) = %+v, more=%v, %v; want %d", prefix, got, more, err, n)
			}
			for _, st := range got {
				if !strings.HasPrefix(st.Key, prefix) {
					t.Fatalf("List(%q) returned %q", prefix, st.Key)
				}
			}
		}
		// The long key is listed under its name.
		name := mysql.LockName(long)
		got, _, err := b.List(ctx, name[:10], 100)
		if err != nil || len(got) != 1 || got[0].Key != name || got[0].Holders[0].Owner != "owner-"+long || got[0].Token != toks[name] {
			t.Fatalf("List(%q) = %+v, %v; want the long key under its name %s", name[:10], got, err, name)
		}
		if got, _, err := b.List(ctx, "", 1000); err != nil || len(got) < 10 {
			t.Fatalf("List of every key = %d states, %v; want at least the 10 held here", len(got), err)
		}
		for _, limit := range []int{0, -1} {
			if _, _, err := b.List(ctx, "ls/", limit); !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "limit") {
				t.Fatalf("List with limit %d: %v, want an error about the limit", limit, err)
			}
		}
		if _, _, err := b.List(ctx, long, 10); !errors.Is(err, turnstile.ErrInvalidKey) || !strings.Contains(err.Error(), "hashed names") {
			t.Fatalf("List with a prefix longer than any name: %v, want an error saying why", err)
		}
	})
}

func TestForceRelease(t *testing.T) {
	srv := testserver.StartMySQL(t)

	t.Run("OwnHolder", func(t *testing.T) {
		// Forced through the Backend that holds the lock, the user lock
		// goes at once: another Backend takes the key straight away.
		ctx := ctxFor(t, 30*time.Second)
		b := dial(t, srv)
		const k = "force-own"
		tok, ok, err := b.Acquire(ctx, k, "stuck", time.Minute)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		other := dial(t, srv)
		if _, ok, err := other.Acquire(ctx, k, "next", time.Minute); ok || err != nil {
			t.Fatalf("Acquire of a held key = %v, %v", ok, err)
		}
		st, err := b.ForceRelease(ctx, k)
		if err != nil || !st.Held || st.Holders[0].Owner != "stuck" || st.Holders[0].Token != tok {
			t.Fatalf("ForceRelease = %+v, %v", st, err)
		}
		next, ok, err := other.Acquire(ctx, k, "next", time.Minute)
		if err != nil || !ok || next <= st.Token {
			t.Fatalf("Acquire right after the forced release = %d, %v, %v; want a token above %d", next, ok, err, st.Token)
		}
		if ok, err := b.Extend(ctx, k, "stuck", time.Minute); ok || err != nil {
			t.Fatalf("Extend by the removed holder = %v, %v; want false", ok, err)
		}
		if ok, err := b.Release(ctx, k, "stuck"); ok || err != nil {
			t.Fatalf("Release by the removed holder = %v, %v; want false", ok, err)
		}
	})

	t.Run("Free", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		b := dial(t, srv)
		st, err := b.ForceRelease(ctx, "force-never")
		if err != nil || st.Held || len(st.Holders) != 0 || st.Token != 0 {
			t.Fatalf("ForceRelease of a key never locked = %+v, %v; want not held, token 0", st, err)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		b := dial(t, srv)
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

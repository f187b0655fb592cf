package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestKindsForceRelease: before any kind was used, a kind's view reads
// every key as free without creating the kinds' table; then, through a
// Client, each kind's view removes every hold of its kind on a key by
// force: the holders' renewals fail, the returned floor is above their
// tokens and below the next one, and a waiting writer's claim stays.
func TestKindsForceRelease(t *testing.T) {
	srv := testserver.StartMySQL(t)
	ctx := testserver.Ctx(t, 2*time.Minute)
	b := dial(t, srv)
	read, write, err := turnstile.ReadWrite(b)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := turnstile.New(read)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Inspect(ctx, "k"); err != nil || st.Held {
		t.Fatalf("Inspect before any kind was used = %+v, %v; want free", st, err)
	}
	if sts, more, err := cl.List(ctx, "", 10); err != nil || len(sts) != 0 || more {
		t.Fatalf("List before any kind was used = %+v, %v, %v; want nothing", sts, more, err)
	}
	if _, ok, err := b.Acquire(ctx, "k", "plain", time.Minute); !ok || err != nil {
		t.Fatalf("plain lock: %v, %v", ok, err)
	}
	if st, err := cl.ForceRelease(ctx, "k"); err != nil || st.Held {
		t.Fatalf("ForceRelease before any kind was used = %+v, %v; want not held", st, err)
	}
	if n := mustExec(t, srv, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '"+mysqlproc.Database+"' AND table_name = 'turnstile_holds'"); n != "0" {
		t.Fatalf("the operator's calls created turnstile_holds (%s tables)", n)
	}

	const ttl = 10 * time.Second
	for _, tc := range []struct {
		name             string
		acquire, inspect driver.Backend
		owners           []string
	}{
		{"reentrant", must(t)(turnstile.Reentrant(b)), must(t)(turnstile.Reentrant(b)), []string{"a", "a"}},
		{"read", read, write, []string{"a", "b"}},
		{"write", write, read, []string{"w"}},
		{"semaphore", must(t)(turnstile.Semaphore(b, 3)), must(t)(turnstile.Semaphore(b, 1)), []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "kinds-force/" + tc.name
			cl, err := turnstile.New(tc.inspect)
			if err != nil {
				t.Fatal(err)
			}
			var tok uint64
			want := map[string]bool{}
			for _, o := range tc.owners {
				tk, ok, err := tc.acquire.Acquire(ctx, key, o, ttl)
				if !ok || err != nil {
					t.Fatalf("acquire by %s: %v, %v", o, ok, err)
				}
				tok, want[o] = max(tok, tk), true
			}
			st, err := cl.ForceRelease(ctx, key)
			if err != nil || !st.Held || len(st.Holders) != len(want) || st.Token <= tok {
				t.Fatalf("ForceRelease = %+v, %v; want holders %v and a floor above %d", st, err, tc.owners, tok)
			}
			for _, h := range st.Holders {
				if !want[h.Owner] || h.Token == 0 || h.Token > tok || h.TTL <= 0 || h.TTL > ttl {
					t.Fatalf("removed holder %+v: want one of %v with a token up to %d and up to %v left", h, tc.owners, tok, ttl)
				}
			}
			for o := range want {
				if ok, err := tc.acquire.Extend(ctx, key, o, ttl); ok || err != nil {
					t.Fatalf("Extend by %s after ForceRelease = %v, %v; want false", o, ok, err)
				}
			}
			if after, err := cl.Inspect(ctx, key); err != nil || after.Held || after.Token != st.Token {
				t.Fatalf("Inspect after ForceRelease = %+v, %v; want free, last token the floor %d", after, err, st.Token)
			}
			if again, err := cl.ForceRelease(ctx, key); err != nil || again.Held || again.Token != st.Token {
				t.Fatalf("a second ForceRelease = %+v, %v; want not held, token %d", again, err, st.Token)
			}
			next, ok, err := tc.acquire.Acquire(ctx, key, "next", ttl)
			if !ok || err != nil || next <= st.Token {
				t.Fatalf("next acquisition = %d, %v, %v; want a token above the floor %d", next, ok, err, st.Token)
			}
		})
	}

	t.Run("WriterClaimStays", func(t *testing.T) {
		const key = "kinds-force/claim"
		if _, ok, err := read.Acquire(ctx, key, "r", ttl); !ok || err != nil {
			t.Fatalf("read lock: %v, %v", ok, err)
		}
		if _, ok, err := write.Acquire(ctx, key, "w", ttl); ok || err != nil {
			t.Fatalf("write lock while read = %v, %v; want refused, leaving a claim", ok, err)
		}
		if st, err := cl.ForceRelease(ctx, key); err != nil || len(st.Holders) != 1 || st.Holders[0].Owner != "r" {
			t.Fatalf("ForceRelease = %+v, %v; want the reader removed", st, err)
		}
		if _, ok, err := read.Acquire(ctx, key, "r2", ttl); ok || err != nil {
			t.Fatalf("a new reader while the writer's claim stands = %v, %v; want refused", ok, err)
		}
		if _, ok, err := write.Acquire(ctx, key, "w", ttl); !ok || err != nil {
			t.Fatalf("the waiting writer after the readers went = %v, %v", ok, err)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := cl.ForceRelease(cctx, "x"); err == nil {
			t.Fatal("ForceRelease with a cancelled context: no error")
		}
	})
}

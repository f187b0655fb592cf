package etcd_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/locktest"
)

// TestKindsInspect: through a Client, each kind's view shows its holders
// with their tokens and time left, lists the keys held in it, and
// removes every hold by force with a token floor above theirs; the
// holders' renewals then fail.
func TestKindsInspect(t *testing.T) {
	_, b := startBackend(t)
	ctx := ctxFor(t, time.Minute)
	sem := locktest.View[*etcd.Semaphore](t)(turnstile.Semaphore(b, 3))
	read, write := locktest.Sides[*etcd.ReadLock, *etcd.WriteLock](t)(turnstile.ReadWrite(b))
	const ttl = 10 * time.Second
	for _, c := range []struct {
		name             string
		acquire, inspect driver.Backend
		owners           []string
	}{
		{"reentrant", locktest.View[*etcd.Reentrant](t)(turnstile.Reentrant(b)), locktest.View[*etcd.Reentrant](t)(turnstile.Reentrant(b)), []string{"a", "a"}},
		{"read", read, write, []string{"a", "b/c"}},
		{"write", write, read, []string{"w"}},
		{"semaphore", sem, sem, []string{"a", "b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "kinds-inspect/" + c.name + " key"
			cl, err := turnstile.New(c.inspect)
			if err != nil {
				t.Fatal(err)
			}
			if st, err := cl.Inspect(ctx, key); err != nil || st.Held || len(st.Holders) != 0 {
				t.Fatalf("Inspect of a free key = %+v, %v; want free", st, err)
			}
			var tok uint64
			want := map[string]bool{}
			for _, o := range c.owners {
				tk, ok, err := c.acquire.Acquire(ctx, key, o, ttl)
				if !ok || err != nil {
					t.Fatalf("acquire by %s: %v, %v", o, ok, err)
				}
				tok, want[o] = max(tok, tk), true
			}
			st, err := cl.Inspect(ctx, key)
			if err != nil || !st.Held || len(st.Holders) != len(want) || st.Token != tok || st.Waiters != 0 {
				t.Fatalf("Inspect = %+v, %v; want holders %v, last token %d, no waiters", st, err, c.owners, tok)
			}
			for _, h := range st.Holders {
				if !want[h.Owner] || h.Token == 0 || h.Token > tok || h.TTL <= 0 || h.TTL > ttl+time.Second {
					t.Fatalf("holder %+v: want one of %v with a token up to %d and up to %v left", h, c.owners, tok, ttl)
				}
			}
			list, more, err := cl.List(ctx, "kinds-inspect/"+c.name, 10)
			if err != nil || more || len(list) != 1 || list[0].Key != key || len(list[0].Holders) != len(want) || list[0].Holders[0].TTL <= 0 {
				t.Fatalf("List = %+v, %v, %v; want %q alone with its holders", list, more, err, key)
			}
			fr, err := cl.ForceRelease(ctx, key)
			if err != nil || !fr.Held || len(fr.Holders) != len(want) || fr.Token <= tok {
				t.Fatalf("ForceRelease = %+v, %v; want the holders and a floor above %d", fr, err, tok)
			}
			for o := range want {
				if ok, err := c.acquire.Extend(ctx, key, o, ttl); ok || err != nil {
					t.Fatalf("Extend by %s after ForceRelease = %v, %v; want false", o, ok, err)
				}
			}
			if st, err := cl.Inspect(ctx, key); err != nil || st.Held {
				t.Fatalf("Inspect after ForceRelease = %+v, %v; want free", st, err)
			}
			if fr, err := cl.ForceRelease(ctx, key); err != nil || fr.Held {
				t.Fatalf("ForceRelease of a free key = %+v, %v; want not held", fr, err)
			}
			next, ok, err := c.acquire.Acquire(ctx, key, "next", ttl)
			if !ok || err != nil || next <= fr.Token {
				t.Fatalf("next acquisition = %d, %v, %v; want a token above the floor %d", next, ok, err, fr.Token)
			}
		})
	}
}

// TestKindsInspectWaitersAndList: a writer queued behind readers counts
// as a waiter and is not removed with them; List finds only the keys
// held in the kind, within its limit, across pages.
func TestKindsInspectWaitersAndList(t *testing.T) {
	_, b := startBackend(t)
	ctx := ctxFor(t, time.Minute)
	read, write := locktest.Sides[*etcd.ReadLock, *etcd.WriteLock](t)(turnstile.ReadWrite(b))
	cl, err := turnstile.New(read)
	if err != nil {
		t.Fatal(err)
	}
	const key = "kinds-waiters"
	if _, ok, err := read.Acquire(ctx, key, "reader", 10*time.Second); !ok || err != nil {
		t.Fatalf("read lock: %v, %v", ok, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wrote := make(chan error, 1)
	go func() {
		_, err := write.AcquireWait(wctx, key, "writer", 10*time.Second)
		wrote <- err
	}()
	for {
		st, err := cl.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the queued writer never shows: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fr, err := cl.ForceRelease(ctx, key)
	if err != nil || !fr.Held || len(fr.Holders) != 1 || fr.Holders[0].Owner != "reader" || fr.Waiters != 1 {
		t.Fatalf("ForceRelease = %+v, %v; want the reader removed and the writer still waiting", fr, err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("the queued writer after the readers went: %v", err)
	}
	if st, err := cl.Inspect(ctx, key); err != nil || !st.Held || st.Holders[0].Owner != "writer" || st.Waiters != 0 {
		t.Fatalf("Inspect = %+v, %v; want the writer holding, nobody waiting", st, err)
	}

	// Enough keys for several pages; a key with a waiter only is not held.
	sem := locktest.View[*etcd.Semaphore](t)(turnstile.Semaphore(b, 1))
	sc, err := turnstile.New(sem)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 600 {
		k := "ls/" + string(rune('a'+i/26%26)) + string(rune('a'+i%26)) + "/" + string(rune('0'+i/676))
		keys = append(keys, k)
		if _, ok, err := sem.Acquire(ctx, k, "o", 20*time.Second); !ok || err != nil {
			t.Fatalf("permit of %s: %v, %v", k, ok, err)
		}
	}
	slices.Sort(keys)
	list, more, err := sc.List(ctx, "ls/", 550)
	if err != nil || !more || len(list) != 550 || list[0].Key != keys[0] || list[549].Key != keys[549] {
		t.Fatalf("List limit 550 of 600 = %d states, more %v, %v", len(list), more, err)
	}
	list, more, err = sc.List(ctx, "ls/", 1000)
	if err != nil || more || len(list) != 600 || list[599].Key != keys[599] {
		t.Fatalf("List of 600 = %d states, more %v, %v", len(list), more, err)
	}
	if list, _, err := sc.List(ctx, "ls/b", 1000); err != nil || len(list) != 26 {
		t.Fatalf("List ls/b = %d states, %v; want 26", len(list), err)
	}
	if _, _, err := sc.List(ctx, "ls/", 0); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("List with limit 0: %v, want ErrInvalidOption", err)
	}
}

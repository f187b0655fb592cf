package zookeeper_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/zookeeper"
)

// TestKinds runs the conformance cases of the reentrant lock, the
// read-write lock and the semaphore, each backend with a session of its
// own.
func TestKinds(t *testing.T) {
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend { return reentrantOf(t, dial(t)) },
		})
	})
	t.Run("ReadWrite", func(t *testing.T) {
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			return locktest.Sides[*zookeeper.ReadLock, *zookeeper.WriteLock](t)(turnstile.ReadWrite(dial(t)))
		})
	})
	t.Run("Semaphore", func(t *testing.T) {
		locktest.RunSemaphore(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				return locktest.View[*zookeeper.Semaphore](t)(turnstile.Semaphore(dial(t), 3))
			},
			Plain: func(t testing.TB) driver.Backend { return dial(t) },
		}, 3)
	})
}

// TestKindsViews: the kinds come through turnstile's functions, and a bad
// number of permits is refused at once.
func TestKindsViews(t *testing.T) {
	b := dial(t)
	if _, err := turnstile.Reentrant(b); err != nil {
		t.Fatal(err)
	}
	if r, w, err := turnstile.ReadWrite(b); err != nil || r == nil || w == nil {
		t.Fatalf("ReadWrite = %v, %v, %v", r, w, err)
	}
	if f, err := turnstile.Fair(b); err != nil || f != driver.Backend(b) {
		t.Fatalf("Fair = %v, %v; want the Backend itself", f, err)
	}
	for _, n := range []int{0, -1, driver.MaxPermits + 1} {
		if _, err := turnstile.Semaphore(b, n); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("Semaphore(%d): %v, want ErrInvalidOption", n, err)
		}
	}
}

// TestSemaphorePermitsStored: while a permit is held with one number, a
// view with another is refused, naming both; once it is back, the other
// number holds.
func TestSemaphorePermitsStored(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	s2 := locktest.View[*zookeeper.Semaphore](t)(turnstile.Semaphore(dial(t), 2))
	s5 := locktest.View[*zookeeper.Semaphore](t)(turnstile.Semaphore(dial(t), 5))
	const key = "kinds-permits"
	if _, ok, err := s2.Acquire(ctx, key, "a", 5*time.Second); !ok || err != nil {
		t.Fatalf("first permit: %v, %v", ok, err)
	}
	_, ok, err := s5.Acquire(ctx, key, "b", 5*time.Second)
	if ok || !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "2") || !strings.Contains(err.Error(), "5") {
		t.Fatalf("other number while a permit is held: %v, %v; want ErrInvalidOption naming 2 and 5", ok, err)
	}
	if ok, err := s2.Release(ctx, key, "a"); !ok || err != nil {
		t.Fatalf("release: %v, %v", ok, err)
	}
	for i, o := range []string{"b", "c", "d", "e", "f"} {
		if _, ok, err := s5.Acquire(ctx, key, o, 5*time.Second); !ok || err != nil {
			t.Fatalf("permit %d of 5 once none is held: %v, %v", i+1, ok, err)
		}
	}
	if _, ok, err := s5.Acquire(ctx, key, "g", 5*time.Second); ok || err != nil {
		t.Fatalf("sixth permit of 5: %v, %v; want refused", ok, err)
	}
}

// TestReentrantOperator: a reentrant hold's nodes carry the Backend's
// digest ACL, and another owner's Release leaves it alone.
func TestReentrantNodes(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	b := dial(t)
	r := reentrantOf(t, b)
	const key = "kinds-reentrant-nodes"
	for range 2 {
		if _, ok, err := r.Acquire(ctx, key, "a", 5*time.Second); !ok || err != nil {
			t.Fatalf("acquire: %v, %v", ok, err)
		}
	}
	op := rawConn(t)
	q := queue(t, op, b.Dir(key)+".reentrant")
	if len(q) != 1 {
		t.Fatalf("queue %v, want one node", q)
	}
	data, _, err := op.Get(b.Dir(key) + ".reentrant/" + q[0])
	if err != nil || string(data) != "2" {
		t.Fatalf("count %q, %v; want 2", data, err)
	}
	if ok, err := reentrantOf(t, dial(t)).Release(ctx, key, "b"); ok || err != nil {
		t.Fatalf("release by another owner: %v, %v", ok, err)
	}
	for i := range 2 {
		if ok, err := reentrantOf(t, dial(t)).Release(ctx, key, "a"); !ok || err != nil {
			t.Fatalf("release %d from another session: %v, %v", i+1, ok, err)
		}
	}
	if q := queue(t, op, b.Dir(key)+".reentrant"); len(q) != 0 {
		t.Fatalf("queue %v after the last release, want empty", q)
	}
}

// TestKindsDigestACL: the nodes of every kind, and the directories that
// hold them, carry the Backend's digest ACL alone, and a client without
// the credentials is refused with ErrPermission instead of joining.
func TestKindsDigestACL(t *testing.T) {
	const pw = "QJZVWKkindsQJZVWK"
	ctx := ctxFor(t, 30*time.Second)
	root := zookeeper.WithRoot("/kinds-acl/locks")
	b := dial(t, root, zookeeper.WithDigestAuth("carol", pw))
	const key = "guarded"
	sem := locktest.View[*zookeeper.Semaphore](t)(turnstile.Semaphore(b, 2))
	read, _ := locktest.Sides[*zookeeper.ReadLock, *zookeeper.WriteLock](t)(turnstile.ReadWrite(b))
	for _, v := range []driver.Backend{reentrantOf(t, b), read, sem} {
		if _, ok, err := v.Acquire(ctx, key, "carol-1", 5*time.Second); !ok || err != nil {
			t.Fatalf("%s: %v, %v", driver.Name(v), ok, err)
		}
	}
	carol := authConn(t, "carol", pw)
	want := zk.DigestACL(zk.PermAll, "carol", pw)
	for _, kind := range []string{"reentrant", "rw", "semaphore"} {
		dir := b.Dir(key) + "." + kind
		names, _, err := carol.Children(dir)
		if err != nil || len(names) != 1 {
			t.Fatalf("children of %s: %v, %v", dir, names, err)
		}
		for _, p := range []string{dir, dir + "/" + names[0]} {
			acl, _, err := carol.GetACL(p)
			if err != nil || len(acl) != 1 || acl[0] != want[0] {
				t.Fatalf("ACL of %s = %+v, %v; want %+v only", p, acl, err, want)
			}
		}
	}
	other := dial(t, root)
	osem := locktest.View[*zookeeper.Semaphore](t)(turnstile.Semaphore(other, 2))
	oread, owrite := locktest.Sides[*zookeeper.ReadLock, *zookeeper.WriteLock](t)(turnstile.ReadWrite(other))
	for _, v := range []driver.Backend{reentrantOf(t, other), oread, owrite, osem} {
		if _, ok, err := v.Acquire(ctx, key, "mallory", 5*time.Second); ok || !errors.Is(err, turnstile.ErrPermission) || strings.Contains(err.Error(), pw) {
			t.Fatalf("%s without credentials: %v, %v; want ErrPermission", driver.Name(v), ok, err)
		}
	}
}

// TestKindsInspect: the operator calls on each kind's view show its
// holders with their tokens, and ForceRelease ends every hold, with a
// token above theirs.
func TestKindsInspect(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	b := dial(t)
	sem := locktest.View[*zookeeper.Semaphore](t)(turnstile.Semaphore(b, 3))
	read, write := locktest.Sides[*zookeeper.ReadLock, *zookeeper.WriteLock](t)(turnstile.ReadWrite(b))
	type view interface {
		driver.Backend
		driver.Inspector
		driver.ForceReleaser
	}
	cases := []struct {
		name    string
		acquire view
		inspect view
		owners  []string
	}{
		{"reentrant", reentrantOf(t, b), reentrantOf(t, b), []string{"a", "a"}},
		{"read", read, write, []string{"a", "b"}},
		{"semaphore", sem, sem, []string{"a", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := "kinds-inspect-" + c.name
			var tok uint64
			for _, o := range c.owners {
				tk, ok, err := c.acquire.Acquire(ctx, key, o, 10*time.Second)
				if !ok || err != nil {
					t.Fatalf("acquire by %s: %v, %v", o, ok, err)
				}
				tok = max(tok, tk)
			}
			st, err := c.inspect.Inspect(ctx, key)
			holders := map[string]bool{}
			for _, h := range st.Holders {
				holders[h.Owner] = h.Token > 0 && h.Token <= tok
			}
			want := map[string]bool{}
			for _, o := range c.owners {
				want[o] = true
			}
			if err != nil || !st.Held || len(holders) != len(want) || len(st.Holders) != len(want) || st.Token < tok {
				t.Fatalf("Inspect = %+v, %v; want holders %v with tokens up to %d", st, err, c.owners, tok)
			}
			for o := range want {
				if !holders[o] {
					t.Fatalf("Inspect = %+v: no holder %s with a token up to %d", st, o, tok)
				}
			}
			list, more, err := c.inspect.List(ctx, "kinds-inspect-", 10)
			if err != nil || more || !slices.ContainsFunc(list, func(s driver.LockState) bool { return s.Key == key && s.Held }) {
				t.Fatalf("List = %+v, %v, %v; want %s among them", list, more, err, key)
			}
			fr, err := c.inspect.ForceRelease(ctx, key)
			if err != nil || !fr.Held || fr.Token <= tok {
				t.Fatalf("ForceRelease = %+v, %v; want the holders and a token above %d", fr, err, tok)
			}
			for _, o := range c.owners {
				if ok, err := c.acquire.Extend(ctx, key, o, 10*time.Second); ok || err != nil {
					t.Fatalf("Extend by %s after ForceRelease = %v, %v; want false", o, ok, err)
				}
			}
			if st, err := c.inspect.Inspect(ctx, key); err != nil || st.Held {
				t.Fatalf("Inspect after ForceRelease = %+v, %v", st, err)
			}
		})
	}
}

// TestReentrantAcrossBackends: an owner that took its hold again through
// a second Backend and released it there keeps the hold: the second
// Backend's TTL timer, whose lease is gone, does not end it.
func TestReentrantAcrossBackends(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	r1, r2 := reentrantOf(t, dial(t)), reentrantOf(t, dial(t))
	const key = "kinds-reentrant-across"
	tok, ok, err := r1.Acquire(ctx, key, "a", 10*time.Second)
	if !ok || err != nil {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	if tok2, ok, err := r2.Acquire(ctx, key, "a", 200*time.Millisecond); !ok || err != nil || tok2 != tok {
		t.Fatalf("re-entry through another Backend: %d, %v, %v; want token %d", tok2, ok, err, tok)
	}
	if ok, err := r2.Release(ctx, key, "a"); !ok || err != nil {
		t.Fatalf("release through the other Backend: %v, %v", ok, err)
	}
	time.Sleep(600 * time.Millisecond) // past the second Backend's TTL
	if ok, err := r1.Extend(ctx, key, "a", 10*time.Second); !ok || err != nil {
		t.Fatalf("the first Backend's hold after the other's lease ended: %v, %v; want held", ok, err)
	}
	if ok, err := r1.Release(ctx, key, "a"); !ok || err != nil {
		t.Fatalf("last release: %v, %v", ok, err)
	}
	if ok, err := r2.Extend(ctx, key, "a", time.Second); ok || err != nil {
		t.Fatalf("Extend after the last release: %v, %v; want false", ok, err)
	}
}

// reentrantOf is b's reentrant view, as callers take it.
func reentrantOf(t testing.TB, b *zookeeper.Backend) *zookeeper.Reentrant {
	return locktest.View[*zookeeper.Reentrant](t)(turnstile.Reentrant(b))
}

// TestReentrantForceReleaseForgets: a ForceRelease through a Backend
// forgets that Backend's count of the owner's acquisitions: once the
// owner holds the key again through another Backend, re-enters through
// the first and releases there, the first Backend's TTL timer stops, and
// does not end the hold the other Backend renews.
func TestReentrantForceReleaseForgets(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	r1, r2 := reentrantOf(t, dial(t)), reentrantOf(t, dial(t))
	const key = "kinds-reentrant-force"
	for range 2 {
		if _, ok, err := r1.Acquire(ctx, key, "a", 10*time.Second); !ok || err != nil {
			t.Fatalf("acquire: %v, %v", ok, err)
		}
	}
	if st, err := r1.ForceRelease(ctx, key); err != nil || !st.Held {
		t.Fatalf("ForceRelease = %+v, %v", st, err)
	}
	tok, ok, err := r2.Acquire(ctx, key, "a", 10*time.Second)
	if !ok || err != nil {
		t.Fatalf("acquire through the other Backend after ForceRelease: %v, %v", ok, err)
	}
	if tok1, ok, err := r1.Acquire(ctx, key, "a", 200*time.Millisecond); !ok || err != nil || tok1 != tok {
		t.Fatalf("re-entry through the first Backend: %d, %v, %v; want token %d", tok1, ok, err, tok)
	}
	if ok, err := r1.Release(ctx, key, "a"); !ok || err != nil {
		t.Fatalf("release through the first Backend: %v, %v", ok, err)
	}
	time.Sleep(time.Second) // past the first Backend's TTL
	if ok, err := r2.Extend(ctx, key, "a", 10*time.Second); !ok || err != nil {
		t.Fatalf("the other Backend's hold after the first one's lease ended: %v, %v; want held", ok, err)
	}
	if ok, err := r2.Release(ctx, key, "a"); !ok || err != nil {
		t.Fatalf("last release: %v, %v", ok, err)
	}
}

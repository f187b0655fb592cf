package locktest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// testInspect checks the operator's view of a store: Client.Inspect,
// List and ForceRelease. A backend that is no driver.Inspector or
// driver.ForceReleaser must say so with turnstile.ErrUnsupported; one
// that is both must report a free key as free, a held key with its
// holder's owner, token and time left, list exactly the held keys under a
// prefix within a limit, and remove a lock by force so that its holder is
// refused and the next holder's token is greater.
func testInspect(t *testing.T, h *Harness) {
	ctx := ctxFor(t, time.Minute)
	c := h.client(t)
	k := key(t)
	_, canInspect := c.Backend().(driver.Inspector)
	_, canForce := c.Backend().(driver.ForceReleaser)
	if !canInspect {
		if _, err := c.Inspect(ctx, k); !errors.Is(err, turnstile.ErrUnsupported) {
			t.Errorf("Inspect on a backend that is no driver.Inspector = %v, want ErrUnsupported", err)
		}
		if _, _, err := c.List(ctx, k, 10); !errors.Is(err, turnstile.ErrUnsupported) {
			t.Errorf("List on a backend that is no driver.Inspector = %v, want ErrUnsupported", err)
		}
	}
	if !canForce {
		if _, err := c.ForceRelease(ctx, k); !errors.Is(err, turnstile.ErrUnsupported) {
			t.Errorf("ForceRelease on a backend that is no driver.ForceReleaser = %v, want ErrUnsupported", err)
		}
	}
	if !canInspect || !canForce {
		return
	}

	st, err := c.Inspect(ctx, k)
	if err != nil {
		t.Fatalf("Inspect of a free key: %v", err)
	}
	if st.Held || len(st.Holders) != 0 || st.Key != k {
		t.Fatalf("Inspect of a free key = %+v, want Held=false, no holders, Key %q", st, k)
	}

	const ttl = 20 * time.Second
	l, err := c.Acquire(ctx, k, turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	st, err = c.Inspect(ctx, k)
	if err != nil {
		t.Fatalf("Inspect of a held key: %v", err)
	}
	if !st.Held || len(st.Holders) != 1 {
		t.Fatalf("Inspect of a held key = %+v, want Held and one holder", st)
	}
	hd := st.Holders[0]
	if hd.Owner != l.Owner() || hd.Token != l.Token() {
		t.Errorf("holder = owner %q token %d, want the lease's: owner %q token %d", hd.Owner, hd.Token, l.Owner(), l.Token())
	}
	if hd.TTL != -1 && (hd.TTL <= 0 || hd.TTL > ttl) {
		t.Errorf("holder TTL = %v, want in (0, %v] (or -1 for a session-bound lock)", hd.TTL, ttl)
	}
	if st.Token < l.Token() {
		t.Errorf("key's last token %d is below the holder's %d", st.Token, l.Token())
	}

	// List: exactly the held keys under the prefix, within the limit.
	prefix := k + "/ls/"
	var want []string
	for _, name := range []string{"a", "b", "c"} {
		lk, err := c.Acquire(ctx, prefix+name, turnstile.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire %s: %v", prefix+name, err)
		}
		t.Cleanup(func() { _ = lk.Release(ctxFor(t, 10*time.Second)) })
		want = append(want, prefix+name)
	}
	free, err := c.Acquire(ctx, prefix+"released", turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := free.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for _, limit := range []int{3, 100} {
		states, more, err := c.List(ctx, prefix, limit)
		if err != nil {
			t.Fatalf("List(%q, %d): %v", prefix, limit, err)
		}
		var got []string
		for _, s := range states {
			got = append(got, s.Key)
			if !s.Held || len(s.Holders) == 0 || s.Holders[0].Owner == "" {
				t.Errorf("List entry %+v: want a held lock with its holder", s)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) || more {
			t.Errorf("List(%q, %d) = %q, more=%v; want %q, more=false", prefix, limit, got, more, want)
		}
	}
	states, more, err := c.List(ctx, prefix, 2)
	if err != nil || len(states) != 2 || !more {
		t.Errorf("List(%q, 2) = %d states, more=%v, err %v; want 2 of the 3, more=true", prefix, len(states), more, err)
	}
	for _, s := range states {
		if !slices.Contains(want, s.Key) {
			t.Errorf("List(%q, 2) found %q, which is not held under the prefix", prefix, s.Key)
		}
	}
	if _, _, err := c.List(ctx, prefix, 0); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("List with limit 0 = %v, want ErrInvalidOption", err)
	}

	// ForceRelease: the holder is refused, the next token is greater.
	removed, err := c.ForceRelease(ctx, k)
	if err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	if !removed.Held || len(removed.Holders) != 1 || removed.Holders[0].Owner != l.Owner() || removed.Holders[0].Token != l.Token() {
		t.Errorf("ForceRelease removed %+v, want the lease's holder (owner %q, token %d)", removed, l.Owner(), l.Token())
	}
	if removed.Token < l.Token() {
		t.Errorf("ForceRelease's fence floor %d is below the removed token %d", removed.Token, l.Token())
	}
	if st, err := c.Inspect(ctx, k); err != nil || st.Held {
		t.Errorf("Inspect after ForceRelease = %+v, %v; want free", st, err)
	}
	b := c.Backend()
	if ok, err := b.Extend(ctx, k, l.Owner(), ttl); ok || err != nil {
		t.Errorf("the removed holder's Extend = %v, %v; want ok=false", ok, err)
	}
	if ok, err := b.Release(ctx, k, l.Owner()); ok || err != nil {
		t.Errorf("the removed holder's Release = %v, %v; want ok=false", ok, err)
	}
	if err := l.Release(ctx); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Errorf("the removed lease's Release = %v, want ErrNotHeld", err)
	}
	again, err := c.ForceRelease(ctx, k)
	if err != nil || again.Held {
		t.Errorf("ForceRelease of a free key = %+v, %v; want Held=false and no error", again, err)
	}
	next, err := c.TryAcquire(ctx, k)
	if err != nil {
		t.Fatalf("TryAcquire after ForceRelease: %v", err)
	}
	defer func() { _ = next.Release(ctx) }()
	if next.Token() <= l.Token() || next.Token() <= removed.Token {
		t.Errorf("next token %d, want greater than the removed %d and the fence floor %d", next.Token(), l.Token(), removed.Token)
	}
}

// testForceReleaseEndsLiveLease: a lock held by a Client whose watchdog
// renews it is removed by force through another backend, as an operator
// would. The removal reports that holder and a fence floor at least its
// token; the holder learns at a renewal that its lease is lost
// (ErrLockLost); the next holder's token is above the floor.
func testForceReleaseEndsLiveLease(t *testing.T, h *Harness) {
	ctx := ctxFor(t, time.Minute)
	holder := h.client(t)
	op, ok := h.backend(t).(driver.ForceReleaser)
	if !ok {
		return // testInspect checks that the Client says so
	}
	k := key(t)
	ttl := max(3*time.Second, h.ttl())
	l, err := holder.Acquire(ctx, k, turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	st, err := op.ForceRelease(ctx, k)
	if err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	if !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != l.Owner() || st.Holders[0].Token != l.Token() || st.Token < l.Token() {
		t.Fatalf("ForceRelease = %+v; want the holder %s with token %d, a floor at least that", st, l.Owner(), l.Token())
	}
	// The holder's Client may have handed the lock on without the store
	// (driver.TokenRoom): the floor is at least every token of such a
	// run, up to the one below the next multiple of the room.
	if tr, ok := op.(driver.TokenRoom); ok && tr.TokenRoom() > 1 {
		r := tr.TokenRoom()
		if last := l.Token() - l.Token()%r + r - 1; st.Token < last {
			t.Fatalf("ForceRelease's floor %d is below %d, the last token a run of handoffs from %d without the store can carry (room %d)", st.Token, last, l.Token(), r)
		}
	}
	if left := st.Holders[0].TTL; left != -1 && (left <= 0 || left > ttl) {
		t.Fatalf("removed holder's TTL left = %v, want in (0, %v], or -1 for a session", left, ttl)
	}
	// The watchdog renews every TTL/3; allow for a busy machine.
	select {
	case <-l.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the holder's lease was not reported lost after a forced release")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, turnstile.ErrLockLost) {
		t.Fatalf("lost lease's cause = %v, want ErrLockLost", cause)
	}
	next, err := h.client(t).Acquire(ctx, k)
	if err != nil {
		t.Fatalf("Acquire after the forced release: %v", err)
	}
	defer next.Release(ctx)
	if next.Token() <= st.Token {
		t.Fatalf("next token %d, want above the floor %d", next.Token(), st.Token)
	}
}

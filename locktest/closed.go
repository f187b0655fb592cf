package locktest

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// testUseAfterClose: once its Client is closed, a lease's Release and
// Extend fail with ErrClosed, whatever error a closed backend itself
// would give, and Release removes nothing: while the backend is open the
// lock stays held until its TTL runs out.
func testUseAfterClose(t *testing.T, h *Harness) {
	ctx := ctxFor(t, time.Minute)
	k := key(t)

	// A Client over a backend that stays open: the lock must stay in the
	// store after Release, until its TTL.
	c, err := turnstile.New(h.backend(t), turnstile.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("turnstile.New: %v", err)
	}
	l, err := c.TryAcquire(ctx, k)
	if err != nil {
		_ = c.Close()
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkClosed(t, "Release after Close", l.Release(ctx))
	checkClosed(t, "Extend after Close", l.Extend(ctx, time.Minute))
	checkClosed(t, "second Release after Close", l.Release(ctx))
	other := h.client(t)
	if l2, err := other.TryAcquire(ctx, k); !errors.Is(err, turnstile.ErrNotAcquired) {
		if l2 != nil {
			_ = l2.Release(ctx)
		}
		t.Fatalf("a Release after Close must leave the lock to its TTL; another owner's TryAcquire = %v", err)
	}

	// A Client over a backend closed with it, as Open's Clients are:
	// the backend's own error for a closed connection must not show.
	b := h.New(t)
	if b == nil {
		t.Fatal("locktest: Harness.New returned nil")
	}
	c, err = turnstile.New(b, turnstile.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("turnstile.New: %v", err)
	}
	l, err = c.TryAcquire(ctx, k+":closed-backend")
	if err != nil {
		_ = c.Close()
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if cl, ok := b.(io.Closer); ok {
		if err := cl.Close(); err != nil {
			t.Fatalf("closing the backend: %v", err)
		}
	}
	checkClosed(t, "Release after Close (backend closed)", l.Release(ctx))
	checkClosed(t, "Extend after Close (backend closed)", l.Extend(ctx, time.Minute))

	if h.URL == "" {
		return
	}
	// A Client from Open, which closes the backend it opened.
	oc, err := turnstile.Open(ctx, h.URL, turnstile.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("turnstile.Open: %v", err)
	}
	ol, err := oc.TryAcquire(ctx, k+":open")
	if err != nil {
		_ = oc.Close()
		t.Fatalf("TryAcquire on the opened Client: %v", err)
	}
	if err := oc.Close(); err != nil {
		t.Fatalf("Close of the opened Client: %v", err)
	}
	checkClosed(t, "Release after Close (Open)", ol.Release(ctx))
	checkClosed(t, "Extend after Close (Open)", ol.Extend(ctx, time.Minute))
}

func checkClosed(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, turnstile.ErrClosed) {
		t.Errorf("%s = %v, want an error matching turnstile.ErrClosed", what, err)
	}
}

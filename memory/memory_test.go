package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	store := memory.New()
	locktest.Run(t, locktest.Harness{
		New:   func(testing.TB) driver.Backend { return store },
		Evict: func(_ testing.TB, key string) { store.Evict(key) },
	})
}

// TestExpiredEntriesAreSwept: keys nobody touches again do not stay in
// memory once expired.
func TestExpiredEntriesAreSwept(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	const n = 10000
	for i := range n {
		if _, ok, err := b.Acquire(ctx, fmt.Sprintf("old:%d", i), "o", time.Millisecond); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	for i := range n {
		if _, ok, err := b.Acquire(ctx, fmt.Sprintf("new:%d", i), "o", time.Hour); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if got := b.Len(); got > n+n/2 {
		t.Fatalf("%d entries kept after %d of %d expired", got, n, 2*n)
	}
}

func TestHolder(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	tok, _, _ := b.Acquire(ctx, "k", "me", time.Minute)
	owner, got, left, ok := b.Holder("k")
	if !ok || owner != "me" || got != tok || left <= 0 || left > time.Minute {
		t.Fatalf("Holder = %q %d %v %v", owner, got, left, ok)
	}
	if !b.Evict("k") {
		t.Fatal("Evict of a held key reported nothing removed")
	}
	if _, _, _, ok := b.Holder("k"); ok {
		t.Fatal("key still held after Evict")
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := memory.New()
	if _, _, err := b.Acquire(ctx, "k", "o", time.Second); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
}

func TestRaiseFence(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	if _, ok, _ := b.Acquire(ctx, "k", "me", time.Minute); !ok {
		t.Fatal("acquire")
	}
	if ok, err := b.RaiseFence(ctx, "k", "other", 1000); ok || err != nil {
		t.Fatalf("RaiseFence by a non-owner = %v, %v; want false, nil", ok, err)
	}
	if ok, err := b.RaiseFence(ctx, "k", "me", 1000); !ok || err != nil {
		t.Fatalf("RaiseFence = %v, %v", ok, err)
	}
	// The holder's token is the raised one now, as a Redis node reports it.
	if _, tok, _, _ := b.Holder("k"); tok != 1000 {
		t.Errorf("holder's token after RaiseFence(1000) = %d, want 1000", tok)
	}
	if ok, _ := b.RaiseFence(ctx, "k", "me", 5); !ok {
		t.Fatal("RaiseFence(5)")
	}
	if st, _ := b.Inspect(ctx, "k"); st.Holders[0].Token != 1000 {
		t.Errorf("a lower raise lowered the holder's token to %d", st.Holders[0].Token)
	}
	b.Release(ctx, "k", "me")
	tok, ok, _ := b.Acquire(ctx, "k", "me2", time.Minute)
	if !ok || tok <= 1000 {
		t.Fatalf("token after RaiseFence(1000) = %d", tok)
	}
}

package admission_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/admission"
)

// TestLocalBurstThenRate: a fresh key admits Burst requests at once, then
// refuses with the time until its bucket holds a token again, and admits
// once that time has passed.
func TestLocalBurstThenRate(t *testing.T) {
	ctx := context.Background()
	const rate, burst = 20, 3 // one token every 50 ms
	l, err := admission.NewLocal(admission.Limit{Rate: rate, Burst: burst})
	if err != nil {
		t.Fatal(err)
	}
	for i := range burst {
		if ok, _, err := l.Admit(ctx, "k"); !ok || err != nil {
			t.Fatalf("request %d of the burst: %v, %v", i+1, ok, err)
		}
	}
	ok, retry, err := l.Admit(ctx, "k")
	if ok || err != nil {
		t.Fatalf("past the burst: %v, %v; want refused", ok, err)
	}
	if retry <= 0 || retry > time.Second/rate {
		t.Fatalf("retry after %v, want in (0, %v]", retry, time.Second/rate)
	}
	// Other keys have buckets of their own.
	if ok, _, _ := l.Admit(ctx, "other"); !ok {
		t.Fatal("another key was refused")
	}
	time.Sleep(retry)
	if ok, again, err := l.Admit(ctx, "k"); !ok || err != nil {
		t.Fatalf("after the retry-after %v: %v, %v (retry %v); want admitted", retry, ok, err, again)
	}
}

// TestLocalBound: Local tracks at most WithMaxKeys keys and forgets the
// least recently asked one; a forgotten key starts with a full burst, a
// kept one keeps its state.
func TestLocalBound(t *testing.T) {
	ctx := context.Background()
	const max = 3
	l, err := admission.NewLocal(admission.Limit{Rate: 0.01, Burst: 1}, admission.WithMaxKeys(max))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if ok, _, _ := l.Admit(ctx, fmt.Sprint("k", i)); !ok {
			t.Fatalf("first request for k%d refused", i)
		}
		if n := l.Len(); n > max {
			t.Fatalf("tracking %d keys, bound %d", n, max)
		}
	}
	if n := l.Len(); n != max {
		t.Fatalf("tracking %d keys, want %d", n, max)
	}
	// k9 is among the most recent three: still spent. k0 was forgotten: a
	// fresh bucket.
	if ok, _, _ := l.Admit(ctx, "k9"); ok {
		t.Error("k9, still tracked, was admitted twice within its burst")
	}
	if ok, _, _ := l.Admit(ctx, "k0"); !ok {
		t.Error("k0, forgotten, was refused")
	}
	// Asking k9 again made it recent: k7 is the oldest now and goes when
	// k0 came back, so k8 and k9 are kept.
	for _, k := range []string{"k8", "k9"} {
		if ok, _, _ := l.Admit(ctx, k); ok {
			t.Errorf("%s, still tracked, was admitted twice within its burst", k)
		}
	}
}

package redis_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestHandOff: the lock passes from its owner to the next owner in one
// step, with a larger token and the next owner's TTL; a caller that does
// not hold it hands over nothing; no release notice is sent.
func TestHandOff(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := dial(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	notices, stop, err := b.Released(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	tok1, ok, err := b.Acquire(ctx, "h", "a", time.Minute)
	if !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, ok, err := b.HandOff(ctx, "h", "x", "y", time.Minute); ok || err != nil {
		t.Fatalf("handoff by a non-owner: %v %v", ok, err)
	}
	if got := srv.MustDo(t, "GET", lockKey("h")); got != "a" {
		t.Fatalf("a refused handoff changed the lock: %q", got)
	}
	tok2, ok, err := b.HandOff(ctx, "h", "a", "b", 5*time.Second)
	if !ok || err != nil || tok2 <= tok1 {
		t.Fatalf("handoff: token %d (before %d), %v %v", tok2, tok1, ok, err)
	}
	if got := srv.MustDo(t, "GET", lockKey("h")); got != "b" {
		t.Fatalf("lock holds %q after the handoff, want b", got)
	}
	if pttl, _ := strconv.Atoi(srv.MustDo(t, "PTTL", lockKey("h"))); pttl <= 0 || pttl > 5000 {
		t.Fatalf("PTTL %d after a handoff with a 5 s TTL", pttl)
	}
	if ok, err := b.Release(ctx, "h", "a"); ok || err != nil {
		t.Fatalf("the former owner released: %v %v", ok, err)
	}
	select {
	case <-notices:
		t.Fatal("a handoff sent a release notice")
	case <-time.After(100 * time.Millisecond):
	}
	if ok, err := b.Release(ctx, "h", "b"); !ok || err != nil {
		t.Fatalf("the new owner's release: %v %v", ok, err)
	}
	select {
	case <-notices:
	case <-time.After(5 * time.Second):
		t.Fatal("no notice after the new owner's release")
	}
}

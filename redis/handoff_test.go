package redis_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
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
	// Nobody failed to take it meanwhile: the release tells nobody.
	if ok, err := b.Release(ctx, "h", "b"); !ok || err != nil {
		t.Fatalf("the new owner's release: %v %v", ok, err)
	}
	select {
	case <-notices:
		t.Fatal("a release nobody waited for sent a notice")
	case <-time.After(100 * time.Millisecond):
	}

	// Someone failed to take it: the handoff keeps that mark, so that the
	// next owner's release tells them.
	if _, ok, err := b.Acquire(ctx, "h", "c", time.Minute); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, ok, err := b.Acquire(ctx, "h", "w", time.Minute); ok || err != nil {
		t.Fatalf("a second owner's acquire: %v %v, want refused", ok, err)
	}
	if _, ok, err := b.HandOff(ctx, "h", "c", "d", time.Minute); !ok || err != nil {
		t.Fatalf("handoff: %v %v", ok, err)
	}
	if got := srv.MustDo(t, "GET", lockKey("h")); got != "d\x01" {
		t.Fatalf("lock holds %q after a handoff of a lock waited for, want %q", got, "d\x01")
	}
	select {
	case <-notices:
		t.Fatal("a handoff sent a release notice")
	case <-time.After(100 * time.Millisecond):
	}
	if ok, err := b.Release(ctx, "h", "d"); !ok || err != nil {
		t.Fatalf("the next owner's release: %v %v", ok, err)
	}
	select {
	case <-notices:
	case <-time.After(5 * time.Second):
		t.Fatal("no notice after the next owner's release of a lock waited for")
	}
}

// TestNoticeOnlyWhenWaitedFor: a release sends its notice only when some
// other owner failed to take the lock while it was held; a quiet release
// of such a lock keeps that mark for the next holder, whose release then
// sends it.
func TestNoticeOnlyWhenWaitedFor(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := dial(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	const k = "marked"
	notices, stop, err := b.Released(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	quiet := func(what string) {
		t.Helper()
		select {
		case <-notices:
			t.Fatalf("%s sent a release notice", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
	told := func(what string) {
		t.Helper()
		select {
		case <-notices:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s sent no release notice", what)
		}
	}
	acquire := func(owner string, want bool) uint64 {
		t.Helper()
		tok, ok, err := b.Acquire(ctx, k, owner, time.Minute)
		if ok != want || err != nil {
			t.Fatalf("acquire by %s: ok=%v err=%v, want ok=%v", owner, ok, err, want)
		}
		return tok
	}
	release := func(owner string) {
		t.Helper()
		if ok, err := b.Release(ctx, k, owner); !ok || err != nil {
			t.Fatalf("release by %s: ok=%v err=%v", owner, ok, err)
		}
	}

	acquire("a", true)
	if ok, waited, err := b.ReleaseWaited(ctx, k, "a"); !ok || waited || err != nil {
		t.Fatalf("ReleaseWaited of a lock nobody waited for: ok=%v waited=%v err=%v", ok, waited, err)
	}
	quiet("a release nobody waited for")
	acquire("a", true)
	acquire("w", false)
	if ok, waited, err := b.ReleaseWaited(ctx, k, "a"); !ok || !waited || err != nil {
		t.Fatalf("ReleaseWaited of a lock waited for: ok=%v waited=%v err=%v", ok, waited, err)
	}
	told("ReleaseWaited of a lock waited for")

	acquire("a", true)
	release("a")
	quiet("a release nobody waited for")

	t1 := acquire("a", true)
	acquire("w", false)
	acquire("w", false) // marks once
	if got := srv.MustDo(t, "GET", lockKey(k)); got != "a\x01" {
		t.Fatalf("lock holds %q after refused attempts, want %q", got, "a\x01")
	}
	if ok, err := b.Extend(ctx, k, "a", time.Minute); !ok || err != nil {
		t.Fatalf("extend of a marked lock: %v %v", ok, err)
	}
	if st, err := b.Inspect(ctx, k); err != nil || !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != "a" {
		t.Fatalf("Inspect of a marked lock = %+v, %v; want held by a", st, err)
	}
	// The owner's own retry (a lost reply) takes it anew, mark and all.
	if tok := acquire("a", true); tok <= t1 {
		t.Fatalf("retry token %d, not above %d", tok, t1)
	}
	release("a")
	told("a release of a lock waited for")

	// Released quietly while waited for: the mark stays, alone, on a lock
	// that is free to take; the next holder takes it over.
	acquire("b", true)
	acquire("w", false)
	if ok, err := b.ReleaseQuiet(ctx, k, "b"); !ok || err != nil {
		t.Fatalf("quiet release: %v %v", ok, err)
	}
	quiet("a quiet release")
	if got := srv.MustDo(t, "GET", lockKey(k)); got != "\x01" {
		t.Fatalf("lock holds %q after a quiet release of a lock waited for, want the mark alone", got)
	}
	if pttl, _ := strconv.Atoi(srv.MustDo(t, "PTTL", lockKey(k))); pttl <= 0 || pttl > int(redis.DefaultFenceGrace/time.Millisecond) {
		t.Fatalf("the mark's PTTL is %d ms, want within the grace", pttl)
	}
	if ok, err := b.Release(ctx, k, "b"); ok || err != nil {
		t.Fatalf("the former owner released the mark: %v %v", ok, err)
	}
	if st, err := b.Inspect(ctx, k); err != nil || st.Held {
		t.Fatalf("Inspect of the mark alone = %+v, %v; want free", st, err)
	}
	acquire("c", true)
	if got := srv.MustDo(t, "GET", lockKey(k)); got != "c\x01" {
		t.Fatalf("lock holds %q, want the next holder with the mark", got)
	}
	release("c")
	told("the next holder's release")
}

package redis_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestNoticeOnlyWhenWaitedFor: a release sends its notice only when some
// other owner failed to take the lock while it was held, and says so;
// with NoticeAlways it sends it in any case; the mark alone, which a client of version 0.1 leaves on a
// lock it released quietly while others waited, is a free lock that the
// next holder takes over with the mark.
func TestNoticeOnlyWhenWaitedFor(t *testing.T) {
	srv, b := startDialled(t)
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
		awaitNotice(t, notices, what+" sent no release notice")
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
	if ok, tried, err := b.ReleaseNotice(ctx, k, "a", driver.NoticeAlways); !ok || tried || err != nil {
		t.Fatalf("ReleaseNotice(NoticeAlways) of a lock nobody waited for: ok=%v tried=%v err=%v", ok, tried, err)
	}
	told("a release with NoticeAlways of a lock nobody waited for")
	acquire("a", true)
	if ok, tried, err := b.ReleaseNotice(ctx, k, "a", driver.NoticeIfTried); !ok || tried || err != nil {
		t.Fatalf("ReleaseNotice(NoticeIfTried) of a lock nobody waited for: ok=%v tried=%v err=%v", ok, tried, err)
	}
	quiet("a release with NoticeIfTried of a lock nobody waited for")
	acquire("a", true)
	acquire("w", false)
	if ok, tried, err := b.ReleaseNotice(ctx, k, "a", driver.NoticeIfTried); !ok || !tried || err != nil {
		t.Fatalf("ReleaseNotice(NoticeIfTried) of a lock waited for: ok=%v tried=%v err=%v", ok, tried, err)
	}
	told("a release with NoticeIfTried of a lock waited for")

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

	// The mark alone, as a quiet release of version 0.1 left it.
	srv.MustDo(t, "SET", lockKey(k), "\x01", "PX", strconv.Itoa(int(redis.DefaultFenceGrace/time.Millisecond)))
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

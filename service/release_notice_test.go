package service_test

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/service"
)

// TestReleaseNoticeThroughService: a turnstile:// backend releases as
// the store behind the service does (Redis sends its release notice
// only when someone else tried the lock): with NoticeIfTried it reports
// whether someone had tried, and the store told them; with NoticeAlways
// (an election's resignation) the store tells its waiters in any case; a
// lease no longer held is left alone, with nobody told.
func TestReleaseNoticeThroughService(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, time.Minute)
	store, err := turnstile.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	in := startInstance(t, service.Config{Backend: store.Backend()})
	b := dial(t, "turnstile://"+in.addr)
	nr, ok := b.(driver.NoticeReleaser)
	if !ok {
		t.Fatalf("%T is no driver.NoticeReleaser: a Client over it could not resign an election aloud", b)
	}
	const key = "notice"
	notices, stop, err := store.Backend().(driver.Notifier).Released(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	told := func(what string) {
		t.Helper()
		select {
		case <-notices:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the store sent no release notice", what)
		}
	}
	acquire := func(owner string) {
		t.Helper()
		if _, ok, err := b.Acquire(ctx, key, owner, time.Minute); !ok || err != nil {
			t.Fatalf("acquire as %s: %v, %v", owner, ok, err)
		}
	}

	acquire("a")
	if ok, tried, err := nr.ReleaseNotice(ctx, key, "a", driver.NoticeIfTried); !ok || tried || err != nil {
		t.Fatalf("release with nobody trying = %v, tried %v, %v; want released, not tried", ok, tried, err)
	}

	acquire("b")
	if _, ok, err := b.Acquire(ctx, key, "other", time.Minute); ok || err != nil {
		t.Fatalf("another owner's attempt on a held lock = %v, %v", ok, err)
	}
	if ok, tried, err := nr.ReleaseNotice(ctx, key, "b", driver.NoticeIfTried); !ok || !tried || err != nil {
		t.Fatalf("release after another owner tried = %v, tried %v, %v; want released, tried", ok, tried, err)
	}
	told("a release after another owner tried")

	acquire("c")
	if ok, tried, err := nr.ReleaseNotice(ctx, key, "c", driver.NoticeAlways); !ok || tried || err != nil {
		t.Fatalf("release aloud with nobody trying = %v, tried %v, %v; want released, not tried", ok, tried, err)
	}
	told("a release with NoticeAlways")

	if ok, tried, err := nr.ReleaseNotice(ctx, key, "c", driver.NoticeAlways); ok || tried || err != nil {
		t.Fatalf("release of a lease no longer held = %v, tried %v, %v; want not released", ok, tried, err)
	}
}

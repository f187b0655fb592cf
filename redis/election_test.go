package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// TestElectionObserversHearTheResignation: a resignation in an election
// that no other candidate contests sends the release notice, for the
// observers, who try nothing (a plain lock's release sends it only when
// someone failed to take the lock), and an observer learns of it.
func TestElectionObserversHearTheResignation(t *testing.T) {
	srv, ctx := startRedis(t)
	leaderC := newClient(t, dial(t, srv))
	observerC := newClient(t, dial(t, srv))
	le, err := leaderC.Election("primary")
	if err != nil {
		t.Fatal(err)
	}
	oe, err := observerC.Election("primary")
	if err != nil {
		t.Fatal(err)
	}
	lead, err := le.Campaign(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}

	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := make(chan turnstile.Leader, 16)
	go func() {
		defer close(seen)
		for l, err := range oe.Observe(octx, time.Minute) {
			if err != nil {
				continue
			}
			seen <- l
		}
	}()
	select {
	case l := <-seen:
		if !l.Elected || l.Value != "node-a" {
			t.Fatalf("first observation %+v, want node-a elected", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the observer saw no leader")
	}
	before := commandCounts(t, srv)
	resigned := time.Now()
	if err := lead.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if n := diff(before, commandCounts(t, srv))["spublish"]; n != 1 {
		t.Fatalf("the resignation published %d release notices, want 1", n)
	}
	select {
	case l := <-seen:
		if l.Elected {
			t.Fatalf("observation after the resignation %+v, want no leader", l)
		}
		t.Logf("vacancy seen %v after the resignation", time.Since(resigned))
	case <-time.After(20 * time.Second):
		t.Fatal("the observer did not learn of the resignation within 20 s")
	}
	stop()
	for range seen {
	}
}

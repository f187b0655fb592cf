package fallback_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/internal/testserver"
	_ "github.com/turnstilelock/turnstile/redlock" // the redlock:// scheme of the primary
)

// TestPhase4 is deployment phase 4 of docs/backends.md, as "turnstile
// advise" gives it: phase 3 (a Redlock of 5 servers with fencing tokens
// and release notices) as the primary of a fallback:// URL whose
// secondary is the database, opened with a Kafka observer:
//
//	turnstile.Open(ctx, "fallback://?primary=redlock://r1,...,r5&secondary=postgres://...",
//		turnstile.WithObserver(kafka)) // kafka: events.NewKafka(brokers)
//
// against real servers (five redis-servers, PostgreSQL, Kafka in
// process). The lock is held past its TTL and excludes everyone else; its
// events reach Kafka; with three of the five Redis servers gone the
// breaker opens and the database grants the next lock after the grace.
//
// Test-only settings on top of the preset: quarantine=0 (the servers have
// just started and hold no lock anyone could lose), a longer node timeout
// for a loaded machine, and a short TTL, grace and trip count so that the
// switch happens within seconds.
func TestPhase4(t *testing.T) {
	t.Parallel()
	const (
		ttl   = 2 * time.Second // the node timeout is at most a tenth of it
		grace = 2500 * time.Millisecond
	)
	var hosts []string
	var nodes []*testserver.Redis
	for range 5 {
		n := testserver.StartRedis(t)
		nodes = append(nodes, n)
		hosts = append(hosts, n.Addr())
	}
	primary := "redlock://" + strings.Join(hosts, ",") + "?quarantine=0&node_timeout=500ms"
	u := "fallback://?primary=" + url.QueryEscape(primary) + "&secondary=" + url.QueryEscape(pg.URL()) +
		"&grace=" + grace.String() + "&open_timeout=1m&pair=phase4"
	warmUp(t, primary)

	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, events.Topic))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(kf.Close)
	kafka, err := events.NewKafka(kf.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kafka.Close() })

	ctx := ctxFor(t, time.Minute)
	open := func() *turnstile.Client {
		c, err := turnstile.Open(ctx, u, turnstile.WithTTL(ttl), turnstile.WithObserver(kafka))
		if err != nil {
			t.Fatalf("open the phase 4 preset: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	holder, other := open(), open()
	if name := holder.Backend().(interface{ Name() string }).Name(); !strings.Contains(name, "redlock") {
		t.Errorf("backend %q, want a fallback over the Redlock", name)
	}

	// Phase 3's lock, under the breaker: held past its TTL by the
	// watchdog, nobody else gets it, the next holder's token is larger.
	l, err := holder.TryAcquire(ctx, "phase4")
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	const hold = ttl + ttl/4
	for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if l.Context().Err() != nil {
			t.Fatalf("lease ended while held: %v", context.Cause(l.Context()))
		}
		// An error is no grant: a node slower than the node timeout on
		// a loaded machine fails the attempt, which is safe.
		if o, err := other.TryAcquire(ctx, "phase4"); err == nil {
			_ = o.Release(ctx)
			t.Fatal("another client got a held lock")
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after %v: %v", hold, err)
	}
	next, err := other.TryAcquire(ctx, "phase4")
	if err != nil {
		t.Fatalf("take the released lock: %v", err)
	}
	if next.Token() <= l.Token() {
		t.Errorf("next holder's token %d is not greater than %d", next.Token(), l.Token())
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Kafka has the lock's events, in order, with its token.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.ConsumeTopics(events.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var seen []events.Event
	want := []string{events.TypeAcquired, events.TypeReleased, events.TypeAcquired, events.TypeReleased}
	for len(seen) < len(want) {
		fs := cl.PollFetches(ctxFor(t, 30*time.Second))
		if err := fs.Err0(); err != nil {
			t.Fatalf("consumed %d lock events of %d: %v", len(seen), len(want), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			ev, err := events.Decode(r.Value)
			if err != nil {
				t.Fatalf("record %s: %v", r.Value, err)
			}
			if ev.Key == "phase4" && (ev.Type == events.TypeAcquired || ev.Type == events.TypeReleased) {
				seen = append(seen, ev)
			}
		})
	}
	for i, ev := range seen {
		if ev.Type != want[i] {
			t.Errorf("event %d is %s, want %s", i, ev.Type, want[i])
		}
	}
	if seen[0].Token != l.Token() || seen[2].Token != next.Token() {
		t.Errorf("events carry tokens %d and %d, the leases %d and %d", seen[0].Token, seen[2].Token, l.Token(), next.Token())
	}

	// Three of five Redis servers gone: no quorum, the breaker opens,
	// and after the grace the database grants the lock.
	for _, n := range nodes[:3] {
		n.Kill()
	}
	state := holder.Backend().(interface{ State() fallback.State })
	deadline := time.Now().Add(45 * time.Second)
	var lease *turnstile.Lease
	for lease == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no lock within 45 s of losing the Redlock's quorum; breaker %v", state.State())
		}
		lease, err = holder.TryAcquire(ctx, "phase4:fallback")
		if err != nil {
			lease = nil
			time.Sleep(100 * time.Millisecond)
		}
	}
	defer func() { _ = lease.Release(ctx) }()
	if s := state.State(); s == fallback.StateClosed {
		t.Errorf("breaker %v after the quorum was lost, want it open", s)
	}
	serving, _ := holder.Backend().(interface{ Serving() (string, bool) }).Serving()
	if !strings.Contains(serving, "postgres") {
		t.Errorf("serving %q, want the PostgreSQL secondary", serving)
	}
	// The other client's own breaker may not have opened yet (its primary
	// then fails) or its secondary may still be in its grace: either way it
	// does not get the key the database already granted.
	if l, err := other.TryAcquire(ctx, "phase4:fallback"); err == nil {
		_ = l.Release(ctx)
		t.Errorf("another client got the key held on the database")
	}
}

// warmUp takes and releases a lock on the Redlock at primary until it
// succeeds, outside any breaker: fresh servers load the scripts on their
// first calls, which on a loaded machine has taken longer than a node
// timeout, and a breaker would count those failures.
func warmUp(t *testing.T, primary string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	c, err := turnstile.Open(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	for {
		l, err := c.TryAcquire(ctx, "phase4:warm-up")
		if err == nil {
			_ = l.Release(ctx)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the fresh Redlock never granted a lock: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

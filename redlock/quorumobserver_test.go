package redlock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redlock"
)

// quorumLog records the rounds a Backend reports to WithQuorumObserver.
type quorumLog struct {
	mu     sync.Mutex
	rounds []string
}

func (q *quorumLog) observe(op string, reached bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rounds = append(q.rounds, op+":"+strconv.FormatBool(reached))
}

// take returns the rounds reported since the last take.
func (q *quorumLog) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.rounds
	q.rounds = nil
	return r
}

func (q *quorumLog) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	if got := q.take(); !slices.Equal(got, want) {
		t.Fatalf("%s: rounds reported %q, want %q", what, got, want)
	}
}

// TestQuorumObserver: every acquire, extend and release round is reported
// once, as reached when a quorum of nodes answered (yes or no) and as not
// reached when too many nodes were dead to decide.
func TestQuorumObserver(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	srvs := startNodes(t, 3)
	q := &quorumLog{}
	b := dialRedlock(t, srvs, redlock.WithRestartQuarantine(0), redlock.WithQuorumObserver(q.observe))
	const ttl = 10 * time.Second

	if _, ok, err := b.Acquire(ctx, "lock:order:1", "owner-a", ttl); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	q.expect(t, "Acquire granted", "acquire:true")
	if _, ok, err := b.Acquire(ctx, "lock:order:1", "owner-b", ttl); ok || err != nil {
		t.Fatalf("Acquire of a held key = %v, %v; want false, nil", ok, err)
	}
	q.expect(t, "Acquire refused by every node", "acquire:true")
	if ok, err := b.Extend(ctx, "lock:order:1", "owner-a", ttl); !ok || err != nil {
		t.Fatalf("Extend = %v, %v", ok, err)
	}
	q.expect(t, "Extend", "extend:true")
	res := b.ExtendMany(ctx, []driver.ExtendRequest{
		{Key: "lock:order:1", Owner: "owner-a", TTL: ttl},
		{Key: "lock:order:2", Owner: "owner-a", TTL: ttl},
	})
	if !res[0].OK || res[0].Err != nil || res[1].OK || res[1].Err != nil {
		t.Fatalf("ExtendMany = %+v; want the held lease extended, the other refused", res)
	}
	q.expect(t, "ExtendMany of two leases", "extend:true", "extend:true")
	if ok, err := b.Release(ctx, "lock:order:1", "owner-a"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	q.expect(t, "Release", "release:true")

	// Two of three nodes dead: no round can be decided.
	srvs[0].Kill()
	srvs[1].Kill()
	if _, _, err := b.Acquire(ctx, "lock:order:3", "owner-a", ttl); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Acquire with 2 of 3 nodes dead: %v, want ErrNoQuorum", err)
	}
	q.expect(t, "Acquire with 2 of 3 nodes dead", "acquire:false")
	if _, err := b.Extend(ctx, "lock:order:3", "owner-a", ttl); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Extend with 2 of 3 nodes dead: %v, want ErrNoQuorum", err)
	}
	q.expect(t, "Extend with 2 of 3 nodes dead", "extend:false")
	if _, err := b.Release(ctx, "lock:order:3", "owner-a"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Release with 2 of 3 nodes dead: %v, want ErrNoQuorum", err)
	}
	q.expect(t, "Release with 2 of 3 nodes dead", "release:false")

	// One node dead: the two others are a quorum.
	srvs[0].Restart()
	waitFor(t, 10*time.Second, "the restarted node to grant locks", func() bool {
		q.take()
		_, ok, err := b.Acquire(ctx, "lock:order:4", "owner-a", ttl)
		return ok && err == nil
	})
	q.expect(t, "Acquire once the node is back", "acquire:true")
	if _, ok, err := b.Acquire(ctx, "lock:order:5", "owner-a", ttl); !ok || err != nil {
		t.Fatalf("Acquire with 1 of 3 nodes dead = %v, %v", ok, err)
	}
	q.expect(t, "Acquire with 1 of 3 nodes dead", "acquire:true")
}

// TestQuorumObserverSkipsCancelledRounds: a round the caller's context cut
// short says nothing about the nodes and is not reported.
func TestQuorumObserverSkipsCancelledRounds(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	nodes, holes, heal := partlyProxied(t, ctx, 3, 1)
	defer heal() // before the clients close: they wait for their replies
	q := &quorumLog{}
	b, err := redlock.New(nodes, redlock.WithQuorumObserver(q.observe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() }) // after heal: it waits for the releases of the abandoned rounds
	for _, hole := range holes {
		hole(time.Hour)
	}

	// A node timeout far beyond the caller's deadline: the caller's
	// context ends the round, however late this goroutine runs. The
	// node timeout is capped at a tenth of the TTL: 100 s lets it be 10 s.
	patient, err := redlock.New(nodes, redlock.WithQuorumObserver(q.observe), redlock.WithNodeTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = patient.Close() })
	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	if _, ok, err := patient.Acquire(short, "lock:order:1", "owner-a", 100*time.Second); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire cut by its context = %v, %v; want an error matching context.DeadlineExceeded", ok, err)
	}
	q.expect(t, "Acquire cut by the caller's context")

	// The same round with the caller still waiting: the silent nodes time
	// out and the round is reported without a quorum.
	if _, _, err := b.Acquire(ctx, "lock:order:2", "owner-a", 10*time.Second); !errors.Is(err, redlock.ErrNodeTimeout) {
		t.Fatalf("Acquire with 2 of 3 nodes silent: %v, want node timeouts", err)
	}
	q.expect(t, "Acquire with 2 of 3 nodes silent", "acquire:false")
}

func TestQuorumObserverNil(t *testing.T) {
	if _, err := redlock.New([]driver.Backend{memory.New()}, redlock.WithQuorumObserver(nil)); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("WithQuorumObserver(nil): %v, want ErrInvalidOption", err)
	}
}

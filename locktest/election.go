package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// electionTTL is the leaders' TTL in the election cases that hand
// leadership over by Resign: long, so that a handover that waited for
// the lock to expire shows.
const electionTTL = 10 * time.Second

// electionBackoff keeps candidates of stores without release notices
// quick to retry, as acquireWithin does.
var electionBackoff = turnstile.WithBackoff(turnstile.Exponential{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond, MaxRetries: -1})

// testElection checks leader election (Client.Election) on the store:
// one leader at a time with strictly increasing terms, quick handovers
// on Resign, a lost lease ending leadership, observers seeing each
// leader in order with its value, and a cancelled Campaign leaving
// nothing behind.
func testElection(t *testing.T, h *Harness) {
	if _, ok := h.client(t).Backend().(driver.Inspector); !ok {
		// Campaign works without it; who leads cannot be read.
		c := h.client(t)
		e, err := c.Election(key(t))
		if err != nil {
			t.Fatalf("Election: %v", err)
		}
		if _, err := e.Leader(ctxFor(t, time.Minute)); !errors.Is(err, turnstile.ErrUnsupported) {
			t.Fatalf("Leader on a backend that is no driver.Inspector = %v, want ErrUnsupported", err)
		}
		t.Run("OneLeaderAtATime", func(t *testing.T) { testOneLeader(t, h) })
		t.Run("CancelledCampaignLeavesNoTrace", func(t *testing.T) { testCancelledCampaign(t, h, false) })
		return
	}
	t.Run("OneLeaderAtATime", func(t *testing.T) { testOneLeader(t, h) })
	t.Run("ObserveSeesEachLeaderInOrder", func(t *testing.T) { testObserveInOrder(t, h) })
	t.Run("LostLeadershipEndsContext", func(t *testing.T) { testLostLeadership(t, h) })
	t.Run("CancelledCampaignLeavesNoTrace", func(t *testing.T) { testCancelledCampaign(t, h, true) })
}

// election returns the election name on a fresh Client.
func (h *Harness) election(t *testing.T, name string, opts ...turnstile.Option) *turnstile.Election {
	t.Helper()
	e, err := h.client(t).Election(name, append([]turnstile.Option{turnstile.WithTTL(electionTTL), electionBackoff}, opts...)...)
	if err != nil {
		t.Fatalf("Election(%q): %v", name, err)
	}
	return e
}

// testOneLeader: three candidates, each on its own Client, campaign for
// two terms each. Never two lead at once, every term is greater than the
// one before, and each Resign hands over well within the TTL.
func testOneLeader(t *testing.T, h *Harness) {
	const candidates, rounds = 3, 2
	name := key(t)
	ctx := ctxFor(t, time.Minute)
	var (
		leading  atomic.Int32
		mu       sync.Mutex
		lastTerm uint64
		resigned time.Time // when the last leader began to resign
		slowest  time.Duration
		terms    int
	)
	errs := make(chan error, candidates*rounds)
	var wg sync.WaitGroup
	for i := range candidates {
		e := h.election(t, name)
		value := fmt.Sprintf("candidate-%d", i)
		wg.Go(func() {
			for range rounds {
				l, err := e.Campaign(ctx, value)
				if err != nil {
					errs <- fmt.Errorf("%s: Campaign: %w", value, err)
					return
				}
				if n := leading.Add(1); n != 1 {
					errs <- fmt.Errorf("%s leads with %d others", value, n-1)
				}
				mu.Lock()
				if l.Term() <= lastTerm {
					errs <- fmt.Errorf("%s: term %d after term %d: terms must increase", value, l.Term(), lastTerm)
				}
				if !resigned.IsZero() {
					slowest = max(slowest, time.Since(resigned))
				}
				lastTerm = l.Term()
				terms++
				mu.Unlock()
				if l.Value() != value {
					errs <- fmt.Errorf("Leadership.Value() = %q, want %q", l.Value(), value)
				}
				time.Sleep(2 * time.Millisecond)
				if l.Context().Err() != nil {
					errs <- fmt.Errorf("%s: leadership ended while leading: %v", value, context.Cause(l.Context()))
				}
				leading.Add(-1)
				mu.Lock()
				resigned = time.Now()
				mu.Unlock()
				if err := l.Resign(ctx); err != nil {
					errs <- fmt.Errorf("%s: Resign: %w", value, err)
					return
				}
				if !errors.Is(context.Cause(l.Context()), turnstile.ErrReleased) {
					errs <- fmt.Errorf("%s: after Resign the context's cause is %v, want ErrReleased", value, context.Cause(l.Context()))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if terms != candidates*rounds {
		t.Fatalf("%d terms, want %d", terms, candidates*rounds)
	}
	// Relative to the TTL, so that a loaded machine does not matter: a
	// handover that waited for the resigned lock to expire would take it
	// all.
	if slowest > electionTTL/2 {
		t.Errorf("slowest handover after Resign took %v; the TTL is %v: Resign must free the lock at once", slowest, electionTTL)
	}
}

// testObserveInOrder: three leaders one after another, each resigning
// once an observer has seen it. The observer sees no leader first, then
// each leader in order, with its value and ever greater terms, and no
// leader at the end; Leader, asked while each leads, reports its value
// and term.
func testObserveInOrder(t *testing.T, h *Harness) {
	name := key(t)
	ctx := ctxFor(t, time.Minute)
	obs := h.election(t, name)
	octx, stop := context.WithCancel(ctx)
	defer stop()

	var mu sync.Mutex
	var seen []turnstile.Leader
	changed := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ldr, err := range obs.Observe(octx, 20*time.Millisecond) {
			if err != nil {
				t.Errorf("Observe: %v", err)
				continue
			}
			mu.Lock()
			seen = append(seen, ldr)
			mu.Unlock()
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	waitSeen := func(what string, ok func(turnstile.Leader) bool) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			mu.Lock()
			hit := len(seen) > 0 && ok(seen[len(seen)-1])
			mu.Unlock()
			if hit {
				return
			}
			select {
			case <-changed:
			case <-deadline:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("the observer never saw %s; it saw %v", what, seen)
			}
		}
	}
	waitSeen("the first report", func(turnstile.Leader) bool { return true })

	values := []string{"leader 0/10.0.0.1:80", "leader-1", "leader_2:ü"}
	var owners []string
	for _, v := range values {
		l, err := h.election(t, name).Campaign(ctx, v)
		if err != nil {
			t.Fatalf("Campaign(%q): %v", v, err)
		}
		owner := l.Lease().Owner()
		owners = append(owners, owner)
		waitSeen(fmt.Sprintf("%q in term %d", v, l.Term()), func(ldr turnstile.Leader) bool {
			return ldr.Elected && ldr.Owner == owner
		})
		now, err := obs.Leader(ctx)
		if err != nil {
			t.Fatalf("Leader: %v", err)
		}
		if !now.Elected || now.Value != v || !termMatches(now.Term, l.Term()) || now.Owner != owner {
			t.Errorf("Leader = %+v, want %q in term %d, owner %q", now, v, l.Term(), owner)
		}
		if err := l.Resign(ctx); err != nil {
			t.Fatalf("Resign: %v", err)
		}
	}
	waitSeen("no leader after the last resigned", func(ldr turnstile.Leader) bool { return !ldr.Elected })
	stop()
	<-done

	mu.Lock()
	defer mu.Unlock()
	if seen[0].Elected {
		t.Errorf("first report = %v before anyone campaigned, want no leader", seen[0])
	}
	// Each leader is reported in order, perhaps more than once if the
	// store reported a greater term for it later (a term that was not
	// final yet, a member that answered late); every report of a leader
	// has a greater term than the one before.
	var order []string
	var lastTerm uint64
	for i, ldr := range seen {
		if i > 0 && ldr == seen[i-1] {
			t.Errorf("report %d repeats the one before: %v", i, ldr)
		}
		if !ldr.Elected {
			if ldr.Value != "" || ldr.Term != 0 || ldr.Owner != "" {
				t.Errorf("report %d: no leader, with fields set: %+v", i, ldr)
			}
			continue
		}
		if ldr.Term <= lastTerm {
			t.Errorf("report %d: %v after term %d: terms must increase", i, ldr, lastTerm)
		}
		lastTerm = ldr.Term
		if len(order) == 0 || order[len(order)-1] != ldr.Owner {
			order = append(order, ldr.Owner)
		}
		if n := slices.Index(owners, ldr.Owner); n < 0 || ldr.Value != values[n] {
			t.Errorf("report %d: %+v is none of the leaders %q", i, ldr, owners)
		}
	}
	if !slices.Equal(order, owners) {
		t.Fatalf("observer saw the leaders %q, want %q in this order: %v", order, owners, seen)
	}
}

// termMatches says whether the term a store reports for a leader fits
// the leader's own: the same, or — on a store made of several whose
// members issue their own tokens (Redlock) — the largest token a member
// holds for the leader, which is no smaller.
func termMatches(reported, term uint64) bool { return reported >= term }

// testLostLeadership: a leader whose lock is removed behind its back
// sees its leadership's context cancelled with ErrLockLost, and the
// candidate waiting behind it leads next with a greater term.
func testLostLeadership(t *testing.T, h *Harness) {
	if h.Evict == nil {
		t.Fatal("locktest: Harness.Evict is nil; the suite needs it to remove a lock behind its holder's back")
	}
	ttl := 2 * h.ttl()
	name := key(t)
	ctx := ctxFor(t, time.Minute)
	a, err := h.election(t, name, turnstile.WithTTL(ttl)).Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	type won struct {
		l   *turnstile.Leadership
		err error
	}
	next := make(chan won, 1)
	b := h.election(t, name, turnstile.WithTTL(ttl))
	go func() {
		l, err := b.Campaign(ctx, "b")
		next <- won{l, err}
	}()

	h.Evict(t, name)
	select {
	case <-a.Context().Done():
		if !errors.Is(context.Cause(a.Context()), turnstile.ErrLockLost) {
			t.Fatalf("cause = %v, want ErrLockLost", context.Cause(a.Context()))
		}
	case <-time.After(ttl + 10*time.Second):
		t.Fatal("the leader was never told that its lock was removed")
	}
	if err := a.Resign(ctx); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Errorf("Resign of a lost leadership = %v, want ErrNotHeld", err)
	}
	select {
	case w := <-next:
		if w.err != nil {
			t.Fatalf("the waiting candidate's Campaign: %v", w.err)
		}
		defer w.l.Resign(ctx)
		if w.l.Term() <= a.Term() {
			t.Fatalf("next leader's term %d is not greater than the lost leader's %d", w.l.Term(), a.Term())
		}
	case <-time.After(ttl + 20*time.Second):
		t.Fatal("the waiting candidate did not lead after the leader's lock was removed")
	}
}

// testCancelledCampaign: a Campaign whose context ends while another
// leads returns the context's error and leaves nothing behind — no
// leader, no place in a store's queue — while its Client stays open:
// once the leader resigns, a third candidate leads well within the TTL.
func testCancelledCampaign(t *testing.T, h *Harness, canInspect bool) {
	name := key(t)
	ctx := ctxFor(t, time.Minute)
	a, err := h.election(t, name).Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	b := h.election(t, name)
	bctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if l, err := b.Campaign(bctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		if l != nil {
			_ = l.Resign(ctx)
		}
		t.Fatalf("Campaign with a context that ends while another leads = %v, want DeadlineExceeded", err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if canInspect {
		// A lock taken as the context ended is released in the
		// background: give it time, not forever.
		deadline := time.Now().Add(electionTTL / 2)
		for {
			ldr, err := b.Leader(ctx)
			if err != nil {
				t.Fatalf("Leader: %v", err)
			}
			if !ldr.Elected {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cancelled candidate's Campaign left a leader behind: %v", ldr)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	start := time.Now()
	c, err := h.election(t, name).Campaign(ctx, "c")
	if err != nil {
		t.Fatalf("Campaign after the cancelled one: %v", err)
	}
	defer c.Resign(ctx)
	if took := time.Since(start); took > electionTTL/2 {
		t.Errorf("a candidate took %v to lead after the leader resigned (TTL %v): the cancelled Campaign held it up", took, electionTTL)
	}
	if c.Term() <= a.Term() {
		t.Errorf("term %d after term %d", c.Term(), a.Term())
	}
}

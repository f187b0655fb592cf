package fallback_test

import (
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/memory"
)

// process is one process's Backend over stores that several processes
// share (a memory store stands for a server).
func process(t *testing.T, p, s driver.Backend) *fallback.Backend {
	t.Helper()
	b, err := fallback.New(p, s, fallback.WithTripAfter(unitTripAft), fallback.WithOpenTimeout(unitOpen), fallback.WithGrace(unitGrace))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantServing(t *testing.T, b *fallback.Backend, who string, name string, inGrace bool) {
	t.Helper()
	if got, g := b.Serving(); got != name || g != inGrace {
		t.Fatalf("%s: serving %q (grace %v), want %q (grace %v)", who, got, g, name, inGrace)
	}
}

// TestStateSharedAcrossProcesses: one process's breaker moves the pair,
// and every other process — one that never called the primary, one
// started after the switch — follows: none is granted anything in the
// grace, all are served by the secondary after it, and all return to the
// primary when one process's probe finds it healthy, the others' leases
// of the secondary then refused.
func TestStateSharedAcrossProcesses(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	pm, sec := newFlaky(), newFlaky()
	prim := &named{flaky: pm, name: "primary"}
	a, b := process(t, prim, sec), process(t, prim, sec)

	pm.down.Store(true)
	for range unitTripAft {
		_, _, _ = a.Acquire(ctx, "trip", "a", unitTTL)
	}
	switched := time.Now()
	if a.State() != fallback.StateOpen {
		t.Fatalf("a's breaker %v, want open", a.State())
	}
	// b never called the primary: it learns of the switch from the
	// secondary, and waits out the same grace.
	if _, ok, err := b.Acquire(ctx, "k", "b", unitTTL); ok || err != nil {
		t.Fatalf("b's acquisition in the grace: %v %v, want not acquired", ok, err)
	}
	wantServing(t, b, "b", "memory", true)

	waitUntil(t, switched.Add(unitGrace))
	if _, ok, err := b.Acquire(ctx, "k", "b", unitTTL); !ok || err != nil {
		t.Fatalf("b after the grace: %v %v, want the secondary to grant", ok, err)
	}
	if owner, _, _, held := sec.Holder("k"); !held || owner != "b" {
		t.Fatal("the secondary does not hold b's lock")
	}
	if _, ok, err := a.Acquire(ctx, "k", "a", unitTTL); ok || err != nil {
		t.Fatalf("a while b holds the key: %v %v, want not acquired", ok, err)
	}
	// A process started now is served at once.
	c := process(t, prim, sec)
	if _, ok, err := c.Acquire(ctx, "k2", "c", unitTTL); !ok || err != nil {
		t.Fatalf("a fresh process after the switch: %v %v, want the secondary to grant", ok, err)
	}
	if _, _, _, held := sec.Holder("k2"); !held {
		t.Fatal("the secondary does not hold the fresh process's lock")
	}

	// The primary recovers; a's probe, after its open timeout, moves the
	// pair back.
	pm.down.Store(false)
	waitUntil(t, switched.Add(unitOpen))
	if _, ok, err := a.Acquire(ctx, "k3", "a", unitTTL); ok || err != nil {
		t.Fatalf("a's acquisition that probes: %v %v, want not acquired (the grace back)", ok, err)
	}
	back := time.Now()
	// b cannot renew its lease of the secondary once it has read that.
	time.Sleep(unitGrace - unitTTL)
	if ok, err := b.Extend(ctx, "k", "b", unitTTL); ok || err != nil {
		t.Fatalf("b renews its lease of the secondary after the switch back: %v %v, want refused", ok, err)
	}
	waitUntil(t, back.Add(unitGrace))
	for _, p := range []struct {
		name string
		b    *fallback.Backend
	}{{"a", a}, {"b", b}, {"c", c}} {
		if _, ok, err := p.b.Acquire(ctx, "k4-"+p.name, p.name, unitTTL); !ok || err != nil {
			t.Fatalf("%s after the grace back: %v %v", p.name, ok, err)
		}
		if _, _, _, held := pm.Holder("k4-" + p.name); !held {
			t.Fatalf("the primary does not hold %s's lock", p.name)
		}
	}
}

// TestPartitionedPrimaryExcludes: a process that cannot reach the
// primary moves the pair while another one still reaches it and holds a
// key there. The holder reads the switch before the grace ends, its lease
// of the primary is refused, and it has ended before the secondary grants
// the key to anyone.
func TestPartitionedPrimaryExcludes(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	shared, sec := memory.New(), memory.New()
	// One primary server, seen through two networks: a's is cut.
	pa, pb := &flaky{Backend: shared}, &flaky{Backend: shared}
	a, b := process(t, &named{flaky: pa, name: "primary"}, sec), process(t, &named{flaky: pb, name: "primary"}, sec)

	start := time.Now()
	if _, ok, err := b.Acquire(ctx, "k", "b", unitTTL); !ok || err != nil {
		t.Fatalf("b takes the key in the primary: %v %v", ok, err)
	}
	heldUntil := start.Add(unitTTL)
	pa.down.Store(true)
	for range unitTripAft {
		_, _, _ = a.Acquire(ctx, "trip", "a", unitTTL)
	}
	// b renews as a watchdog does, and believes it holds the key until
	// the TTL after the start of its last good renewal; a tries the key.
	var granted time.Time
	for deadline := time.Now().Add(4 * unitGrace); time.Now().Before(deadline) && granted.IsZero(); time.Sleep(unitTTL / 10) {
		if !heldUntil.IsZero() {
			renew := time.Now()
			ok, err := b.Extend(ctx, "k", "b", unitTTL)
			switch {
			case ok:
				heldUntil = renew.Add(unitTTL)
			case err == nil || time.Now().After(heldUntil):
				heldUntil = time.Time{} // refused, or failing past its end: b has let go
			}
		}
		if _, ok, err := a.Acquire(ctx, "k", "a", unitTTL); ok && err == nil {
			granted = time.Now()
		}
	}
	if granted.IsZero() {
		t.Fatal("the secondary never granted the key")
	}
	if !heldUntil.IsZero() && !heldUntil.Before(granted) {
		t.Fatalf("the secondary granted the key %v before b's lease of the primary ended", heldUntil.Sub(granted))
	}
	if name, _ := b.Serving(); name != "memory" || b.State() != fallback.StateClosed {
		t.Fatalf("b serves %q with its breaker %v; want the secondary, its own breaker closed", name, b.State())
	}
}

// TestRegisterKeysHidden: the switch locks in the secondary are not
// listed as the Client's locks, and cannot be removed through the pair.
func TestRegisterKeysHidden(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	pm, sec := newFlaky(), newFlaky()
	b, err := fallback.New(pm, sec, fallback.WithTripAfter(1), fallback.WithGrace(unitGrace), fallback.WithPair("hidden"))
	if err != nil {
		t.Fatal(err)
	}
	pm.down.Store(true)
	_, _, _ = b.Acquire(ctx, "trip", "a", unitTTL)
	all, _, err := sec.List(ctx, "", 10)
	if err != nil || len(all) != 1 || !strings.HasPrefix(all[0].Key, "turnstile:fallback:hidden/") {
		t.Fatalf("the secondary's locks after the switch: %+v %v, want the one switch lock", all, err)
	}
	states, _, err := b.List(ctx, "", 10)
	if err != nil || len(states) != 0 {
		t.Fatalf("the pair lists %+v %v, want nothing", states, err)
	}
	if _, err := b.ForceRelease(ctx, all[0].Key); err == nil {
		t.Fatal("the pair removed its own switch lock")
	}
}

// named is a flaky store with a name of its own, so that two processes'
// pairs over it tell the stores apart in Serving.
type named struct {
	*flaky
	name string
}

func (n *named) Name() string { return n.name }

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redlock"
)

// downNode is a node that fails every operator call, as an unreachable store
// does.
type downNode struct{ *memory.Backend }

var errNodeDown = errors.New("connection refused")

func (downNode) Inspect(context.Context, string) (driver.LockState, error) {
	return driver.LockState{}, errNodeDown
}
func (downNode) List(context.Context, string, int) ([]driver.LockState, bool, error) {
	return nil, false, errNodeDown
}
func (downNode) ForceRelease(context.Context, string) (driver.LockState, error) {
	return driver.LockState{}, errNodeDown
}

// overMemory returns a Redlock over three in-process stores, and the
// stores; the Redlock is closed when the test ends.
func overMemory(t *testing.T) ([]*memory.Backend, *redlock.Backend) {
	t.Helper()
	nodes := []*memory.Backend{memory.New(), memory.New(), memory.New()}
	b, err := redlock.New([]driver.Backend{nodes[0], nodes[1], nodes[2]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return nodes, b
}

// TestInspectQuorum: a Redlock reports a lock held only where a quorum
// of nodes holds it for one owner, and needs a quorum of answers.
func TestInspectQuorum(t *testing.T) {
	ctx := context.Background()
	nodes, b := overMemory(t)
	// Held on one node only: a minority holds no Redlock.
	if _, ok, _ := nodes[0].Acquire(ctx, "k", "minority", time.Minute); !ok {
		t.Fatal("node acquire")
	}
	st, err := b.Inspect(ctx, "k")
	if err != nil || st.Held {
		t.Errorf("a lock on 1 node of 3 = %+v, %v; want free", st, err)
	}
	if states, _, err := b.List(ctx, "", 10); err != nil || len(states) != 0 {
		t.Errorf("List with a minority lock = %+v, %v; want none", states, err)
	}
	tok1, _, _ := nodes[1].Acquire(ctx, "k2", "maj", time.Minute)
	tok2, _, _ := nodes[2].Acquire(ctx, "k2", "maj", time.Minute)
	st, err = b.Inspect(ctx, "k2")
	if err != nil || !st.Held || st.Holders[0].Owner != "maj" || st.Holders[0].Token != max(tok1, tok2) {
		t.Errorf("a lock on 2 nodes of 3 = %+v, %v; want held by maj with token %d", st, err, max(tok1, tok2))
	}
	states, more, err := b.List(ctx, "k", 10)
	if err != nil || len(states) != 1 || states[0].Key != "k2" || more {
		t.Errorf("List = %+v more=%v %v; want k2 only", states, more, err)
	}

	// ForceRelease removes it on every node.
	removed, err := b.ForceRelease(ctx, "k2")
	if err != nil || !removed.Held || removed.Holders[0].Owner != "maj" {
		t.Errorf("ForceRelease = %+v, %v", removed, err)
	}
	if removed.Token < max(tok1, tok2) {
		t.Errorf("fence floor %d below the removed token %d", removed.Token, max(tok1, tok2))
	}
	for i, n := range nodes {
		if _, _, _, held := n.Holder("k2"); held {
			t.Errorf("node %d still holds k2", i+1)
		}
	}
}

// TestInspectNodesDown: one node of three down, operator calls still
// work; two down, they fail with ErrNoQuorum naming the nodes' errors.
func TestInspectNodesDown(t *testing.T) {
	ctx := context.Background()
	a, bn, c := memory.New(), memory.New(), memory.New()
	// WithWaitAll: every node saw the acquisition when it returns, since
	// Inspect below reads only a and bn.
	one, err := redlock.New([]driver.Backend{a, bn, downNode{c}}, redlock.WithWaitAll())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	cl, err := turnstile.New(one)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The down node still grants locks (its Backend methods work): only
	// its operator calls fail.
	l, err := cl.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Inspect(ctx, "k"); err != nil || !st.Held || st.Holders[0].Owner != l.Owner() {
		t.Errorf("Inspect with one node down = %+v, %v", st, err)
	}
	if st, err := cl.ForceRelease(ctx, "k"); err != nil || !st.Held {
		t.Errorf("ForceRelease with one node down = %+v, %v", st, err)
	}

	two, err := redlock.New([]driver.Backend{a, downNode{bn}, downNode{c}})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	_, ierr := two.Inspect(ctx, "k")
	_, _, lerr := two.List(ctx, "", 10)
	_, ferr := two.ForceRelease(ctx, "k")
	for _, err := range []error{ierr, lerr, ferr} {
		if !errors.Is(err, redlock.ErrNoQuorum) || !errors.Is(err, errNodeDown) {
			t.Errorf("with two nodes of three down: %v, want ErrNoQuorum and the nodes' error", err)
		}
	}
}

// TestInspectUnsupportedNode: a node that cannot be inspected makes the
// Redlock say so.
func TestInspectUnsupportedNode(t *testing.T) {
	ctx := context.Background()
	b, err := redlock.New([]driver.Backend{memory.New(), memory.New(), unfenced{memory.New()}}, redlock.WithoutFencing())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, ierr := b.Inspect(ctx, "k")
	_, ferr := b.ForceRelease(ctx, "k")
	for _, err := range []error{ierr, ferr} {
		if !errors.Is(err, turnstile.ErrUnsupported) {
			t.Errorf("%v, want ErrUnsupported", err)
		}
	}
}

// TestInspectReportsTheLeaseToken: Inspect reports a Redlock holder's
// token as at least the token its lease has, whichever nodes formed the
// granting quorum. Two nodes issue a smaller token than the third; when
// the third is in the quorum the lease takes its token and writes it back,
// and the two smaller grants must not outvote it once all three hold.
func TestInspectReportsTheLeaseToken(t *testing.T) {
	ctx := context.Background()
	nodes, b := overMemory(t)
	for i := range 60 {
		// Node 2's counter runs ahead of the others'.
		for range 3 {
			if _, ok, err := nodes[2].Acquire(ctx, "skew", "x", time.Minute); !ok || err != nil {
				t.Fatalf("skew acquire: %v %v", ok, err)
			}
			if _, err := nodes[2].Release(ctx, "skew", "x"); err != nil {
				t.Fatal(err)
			}
		}
		key := fmt.Sprintf("k%d", i)
		owner := fmt.Sprintf("o%d", i)
		tok, ok, err := b.Acquire(ctx, key, owner, time.Minute)
		if !ok || err != nil {
			t.Fatalf("Acquire %s: %v %v", key, ok, err)
		}
		// Wait until every node holds it: the third grant may land after
		// Acquire returned.
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := 0
			for _, node := range nodes {
				if o, _, _, held := node.Holder(key); held && o == owner {
					n++
				}
			}
			if n == len(nodes) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: only %d nodes hold it", key, n)
			}
			time.Sleep(time.Millisecond)
		}
		st, err := b.Inspect(ctx, key)
		if err != nil || !st.Held || st.Holders[0].Owner != owner {
			t.Fatalf("Inspect %s = %+v, %v; want held by %s", key, st, err, owner)
		}
		if got := st.Holders[0].Token; got < tok {
			t.Fatalf("Inspect %s reports token %d, below the lease's %d", key, got, tok)
		}
	}
}

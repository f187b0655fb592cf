package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestKinds runs the conformance cases of the reentrant lock on a
// Redlock of three redis-servers, a Redlock of the servers' reentrant
// views with tokens written back (the raise of a view's fence is the
// redis package's). The read-write cases run on in-process nodes
// (TestKindsMemory), with the same quorum logic: on three servers under
// the race detector their load cases take minutes, as writers split the
// nodes' votes and retry; TestReadWriteRedis checks the servers' sides.
func TestKinds(t *testing.T) {
	conns := redisNodes(t, startNodes(t, 3))
	b, err := redlock.New(conns, redlock.WithNodeTimeout(conformanceNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	runKinds(t, b, false)
}

// TestKindsMemory runs the same cases on a Redlock of in-process nodes.
func TestKindsMemory(t *testing.T) {
	b, err := redlock.New([]driver.Backend{memory.New(), memory.New(), memory.New()}, redlock.WithNodeTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	runKinds(t, b, true)
}

func runKinds(t *testing.T, b *redlock.Backend, rw bool) {
	re := locktest.View[driver.Backend](t)(turnstile.Reentrant(b))
	read, write := locktest.Sides[driver.Backend, driver.Backend](t)(turnstile.ReadWrite(b))
	if s, ok := read.(driver.Shared); !ok || !s.Shared() {
		t.Fatalf("the read side %T is not driver.Shared", read)
	}
	if _, ok := write.(driver.Shared); ok {
		t.Fatalf("the write side %T is driver.Shared", write)
	}
	if _, ok := re.(driver.Fencer); !ok {
		t.Fatalf("the reentrant view %T raises no fence", re)
	}
	// The suite closes each instance after a case: every one is a view
	// of its own.
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{New: func(t testing.TB) driver.Backend {
			return locktest.View[driver.Backend](t)(turnstile.Reentrant(b))
		}})
	})
	if !rw {
		return
	}
	t.Run("ReadWrite", func(t *testing.T) {
		locktest.RunReadWrite(t, func(t testing.TB) (driver.Backend, driver.Backend) {
			return locktest.Sides[driver.Backend, driver.Backend](t)(turnstile.ReadWrite(b))
		})
	})
}

// TestKindsRefused: a Redlock offers no semaphore and no fair lock, and
// says why; a node without a kind is named.
func TestKindsRefused(t *testing.T) {
	b, err := redlock.New([]driver.Backend{memory.New(), memory.New(), memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := turnstile.Semaphore(b, 2); !errors.Is(err, turnstile.ErrUnsupported) || !errors.Is(err, redlock.ErrSemaphore) || !strings.Contains(err.Error(), "does not bound") {
		t.Fatalf("Semaphore = %v, want ErrSemaphore (ErrUnsupported) with the reason", err)
	}
	if _, err := turnstile.Fair(b); !errors.Is(err, turnstile.ErrUnsupported) || !errors.Is(err, redlock.ErrFair) {
		t.Fatalf("Fair = %v, want ErrFair (ErrUnsupported)", err)
	}

	plain, err := redlock.New([]driver.Backend{memory.New(), plainOnly{memory.New()}, memory.New()}, redlock.WithoutFencing())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := turnstile.Reentrant(plain); !errors.Is(err, turnstile.ErrUnsupported) || !strings.Contains(err.Error(), "node 2") {
		t.Fatalf("Reentrant with a node that has none = %v, want ErrUnsupported naming node 2", err)
	}
	if _, _, err := turnstile.ReadWrite(plain); !errors.Is(err, turnstile.ErrUnsupported) || !strings.Contains(err.Error(), "node 2") {
		t.Fatalf("ReadWrite with a node that has none = %v, want ErrUnsupported naming node 2", err)
	}
}

// plainOnly is a node with the plain lock alone.
type plainOnly struct{ driver.Backend }

// TestKindsSettings: the nodes' views are made with the Redlock's view's
// settings.
func TestKindsSettings(t *testing.T) {
	nodes := make([]driver.Backend, 3)
	asked := make([]*askedNode, 3)
	for i := range nodes {
		asked[i] = &askedNode{Backend: memory.New()}
		nodes[i] = asked[i]
	}
	b, err := redlock.New(nodes, redlock.WithoutFencing())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, _, err := turnstile.ReadWrite(b, turnstile.WithWriterClaim(750*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	for i, n := range asked {
		if want := (driver.KindConfig{WriterClaim: 750 * time.Millisecond}); n.asked != want {
			t.Errorf("node %d's read-write view was made with %+v, want %+v", i+1, n.asked, want)
		}
	}
}

// askedNode is a node that keeps the settings of its read-write view.
type askedNode struct {
	*memory.Backend
	asked driver.KindConfig
}

func (n *askedNode) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	n.asked = cfg
	return n.Backend.ReadWriteView(cfg)
}

// TestSemaphoreQuorumCounterexample is ErrSemaphore's counterexample on
// three nodes' semaphores of 2 permits: three owners each hold a quorum
// of permits.
func TestSemaphoreQuorumCounterexample(t *testing.T) {
	ctx := context.Background()
	var nodes [3]*memory.Semaphore
	for i := range nodes {
		nodes[i] = locktest.View[*memory.Semaphore](t)(turnstile.Semaphore(memory.New(), 2))
	}
	quorums := map[string][2]int{"A": {0, 1}, "B": {1, 2}, "C": {0, 2}}
	for owner, q := range quorums {
		for _, i := range q {
			if _, ok, err := nodes[i].Acquire(ctx, "k", owner, time.Minute); !ok || err != nil {
				t.Fatalf("%s on node %d: %v %v", owner, i+1, ok, err)
			}
		}
	}
	// Every node is full, and every owner holds a quorum (2 of 3).
	for i, n := range nodes {
		if _, ok, err := n.Acquire(ctx, "k", "D", time.Minute); ok || err != nil {
			t.Fatalf("node %d gave a third permit: %v %v", i+1, ok, err)
		}
	}
	if len(quorums) <= 2 {
		t.Fatal("the counterexample needs more holders than permits")
	}
}

// TestReadWriteRedis: on three redis-servers, readers share a key, a
// writer is kept out while they hold it and leaves its claim on the
// nodes, which keeps new readers out; once the readers leave the writer
// enters, with a token above theirs that a quorum's fences hold.
func TestReadWriteRedis(t *testing.T) {
	srvs := startNodes(t, 3)
	b, err := redlock.New(redisNodes(t, srvs), redlock.WithNodeTimeout(conformanceNodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	read, write, err := turnstile.ReadWrite(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	const k, ttl = "rw", 10 * time.Second
	var last uint64
	for _, o := range []string{"r1", "r2"} {
		tok, ok, err := read.Acquire(ctx, k, o, ttl)
		if !ok || err != nil {
			t.Fatalf("reader %s: %v %v", o, ok, err)
		}
		last = max(last, tok)
	}
	if _, ok, err := write.Acquire(ctx, k, "w", ttl); ok || err != nil {
		t.Fatalf("writer among readers: %v %v, want refused", ok, err)
	}
	if _, ok, err := read.Acquire(ctx, k, "r3", ttl); ok || err != nil {
		t.Fatalf("new reader behind a waiting writer: %v %v, want refused", ok, err)
	}
	for _, o := range []string{"r1", "r2"} {
		if ok, err := read.Release(ctx, k, o); !ok || err != nil {
			t.Fatalf("release %s: %v %v", o, ok, err)
		}
	}
	tok, ok, err := write.Acquire(ctx, k, "w", ttl)
	if !ok || err != nil {
		t.Fatalf("writer after the readers left: %v %v", ok, err)
	}
	if tok <= last {
		t.Fatalf("writer's token %d is not above the readers' %d", tok, last)
	}
	fenced := 0
	for _, srv := range srvs {
		if v, err := srv.Do("GET", lockKey(k)+":fence"); err == nil {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && n >= tok {
				fenced++
			}
		}
	}
	if fenced < b.Quorum() {
		t.Fatalf("%d nodes hold a fence of at least %d, want a quorum of %d", fenced, tok, b.Quorum())
	}
	if _, ok, err := read.Acquire(ctx, k, "r4", ttl); ok || err != nil {
		t.Fatalf("reader under the writer: %v %v, want refused", ok, err)
	}
	if ok, err := write.Release(ctx, k, "w"); !ok || err != nil {
		t.Fatalf("writer release: %v %v", ok, err)
	}
}

// TestReentrantForceReleaseForgets: after an operator removes a reentrant
// hold by force, the same owner's next acquisition is a new hold with a
// token above the removal's floor, not a re-entry of the removed one.
func TestReentrantForceReleaseForgets(t *testing.T) {
	b, err := redlock.New([]driver.Backend{memory.New(), memory.New(), memory.New()}, redlock.WithNodeTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	re, err := turnstile.Reentrant(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, ok, err := re.Acquire(ctx, "k", "A", time.Minute)
	if !ok || err != nil {
		t.Fatalf("first acquisition = %v, %v", ok, err)
	}
	st, err := re.(driver.ForceReleaser).ForceRelease(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if st.Token < first {
		t.Fatalf("force release reported token %d, below the holder's %d", st.Token, first)
	}
	again, ok, err := re.Acquire(ctx, "k", "A", time.Minute)
	if !ok || err != nil {
		t.Fatalf("acquisition after the removal = %v, %v", ok, err)
	}
	if again <= st.Token {
		t.Fatalf("token after the removal %d, not above the removed holder's %d: the view took it for a re-entry", again, st.Token)
	}
}

package redlock_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redlock"
)

// cluster returns n flaky memory nodes and a Redlock over them, closed
// when the test ends.
func cluster(t *testing.T, n int, opts ...redlock.Option) (*redlock.Backend, []*flaky) {
	t.Helper()
	nodes := make([]*flaky, n)
	backends := make([]driver.Backend, n)
	for i := range nodes {
		nodes[i] = newFlaky("mem" + string(rune('1'+i)))
		backends[i] = nodes[i]
	}
	b, err := redlock.New(backends, opts...)
	if err != nil {
		t.Fatalf("redlock.New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, nodes
}

// holders counts the nodes on which owner holds key.
func holders(nodes []*flaky, key, owner string) int {
	n := 0
	for _, f := range nodes {
		if o, _, _, ok := f.mem.Holder(key); ok && o == owner {
			n++
		}
	}
	return n
}

func TestQuorumSize(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		b, _ := cluster(t, n)
		if b.Quorum() != want {
			t.Errorf("%d nodes: quorum %d, want %d", n, b.Quorum(), want)
		}
	}
}

func TestValidityFormula(t *testing.T) {
	// TTL 10,000 ms, 50 ms elapsed, drift 100 ms + 2 ms → 9,848 ms.
	if got := redlock.Validity(10*time.Second, 50*time.Millisecond); got != 9848*time.Millisecond {
		t.Fatalf("Validity(10s, 50ms) = %v, want 9.848s", got)
	}
	if got := redlock.Validity(30*time.Second, 0); got != 30*time.Second-302*time.Millisecond {
		t.Fatalf("Validity(30s, 0) = %v, want 29.698s", got)
	}
}

func TestNodeTimeoutCap(t *testing.T) {
	b, _ := cluster(t, 3)
	for ttl, want := range map[time.Duration]time.Duration{
		30 * time.Second:       redlock.DefaultNodeTimeout,
		300 * time.Millisecond: 30 * time.Millisecond,
		time.Millisecond:       100 * time.Microsecond,
	} {
		if got := b.NodeTimeout(ttl); got != want {
			t.Errorf("node timeout for ttl %v = %v, want %v", ttl, got, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	m1, m2 := memory.New(), memory.New()
	var typedNil *memory.Backend
	for name, tc := range map[string]struct {
		nodes []driver.Backend
		opts  []redlock.Option
	}{
		"no nodes":              {nil, nil},
		"nil node":              {[]driver.Backend{m1, nil, m2}, nil},
		"typed nil node":        {[]driver.Backend{m1, typedNil, m2}, nil},
		"duplicate node":        {[]driver.Backend{m1, m2, m1}, nil},
		"node without fencer":   {[]driver.Backend{m1, m2, unfenced{memory.New()}}, nil},
		"nil option":            {[]driver.Backend{m1}, []redlock.Option{nil}},
		"node timeout too low":  {[]driver.Backend{m1}, []redlock.Option{redlock.WithNodeTimeout(time.Microsecond)}},
		"node timeout too high": {[]driver.Backend{m1}, []redlock.Option{redlock.WithNodeTimeout(time.Minute)}},
		"negative quarantine":   {[]driver.Backend{m1}, []redlock.Option{redlock.WithRestartQuarantine(-time.Second)}},
	} {
		if _, err := redlock.New(tc.nodes, tc.opts...); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := redlock.New([]driver.Backend{m1, m2, unfenced{memory.New()}}, redlock.WithoutFencing()); err != nil {
		t.Errorf("a node without fencer with WithoutFencing: %v", err)
	}

	b, _ := cluster(t, 3)
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, _, err := b.Acquire(nil, "k", "o", time.Second); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("Acquire(nil ctx) = %v, want ErrInvalidOption", err)
	}
}

// TestTTLAboveQuarantine: nodes that refuse locks for a while after a
// restart protect only leases that do not outlive that while.
func TestTTLAboveQuarantine(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, err := redlock.New([]driver.Backend{
		quarantined{memory.New(), time.Minute},
		quarantined{memory.New(), 30 * time.Second},
		quarantined{memory.New(), 0}, // off: no limit from this one
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, _, err := b.Acquire(ctx, "k", "o", 31*time.Second); !errors.Is(err, turnstile.ErrInvalidTTL) {
		t.Fatalf("Acquire with a ttl above the shortest quarantine = %v, want ErrInvalidTTL", err)
	}
	if _, ok, err := b.Acquire(ctx, "k", "o", 30*time.Second); !ok || err != nil {
		t.Fatalf("Acquire with a ttl equal to the quarantine: ok=%v err=%v", ok, err)
	}
	if _, err := b.Extend(ctx, "k", "o", time.Minute); !errors.Is(err, turnstile.ErrInvalidTTL) {
		t.Fatalf("Extend with a ttl above the quarantine = %v, want ErrInvalidTTL", err)
	}
}

// TestMinorityDown: with 5 nodes, 2 down still grants; 3 down fails with
// a QuorumError that counts and names the nodes, and what was granted is
// released at once.
func TestMinorityDown(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, nodes := cluster(t, 5)
	for _, f := range nodes[:2] {
		f.set(func(f *flaky) { f.down = true })
	}
	if _, ok, err := b.Acquire(ctx, "two-down", "a", time.Minute); !ok || err != nil {
		t.Fatalf("2 of 5 down: ok=%v err=%v", ok, err)
	}
	nodes[2].set(func(f *flaky) { f.down = true })
	_, ok, err := b.Acquire(ctx, "three-down", "a", time.Minute)
	var qe *redlock.QuorumError
	if ok || !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNoQuorum) || !errors.Is(err, errDown) {
		t.Fatalf("3 of 5 down: ok=%v err=%v; want a QuorumError matching ErrNoQuorum and the nodes' error", ok, err)
	}
	if qe.Op != "acquire" || qe.Nodes != 5 || qe.Quorum != 3 || qe.Yes+qe.Pending > 2 || qe.Failed < 3-qe.Pending {
		t.Fatalf("QuorumError %+v: want 5 nodes, quorum 3, at most 2 yes, 3 failed", qe)
	}
	if msg := err.Error(); !strings.Contains(msg, "node 1 (mem1)") || !strings.Contains(msg, "quorum 3") {
		t.Fatalf("error %q should name the failed nodes and the quorum", msg)
	}
	b.Close() // waits for the background release of the partial grant
	if n := holders(nodes, "three-down", "a"); n != 0 {
		t.Fatalf("a failed acquisition still holds %d nodes", n)
	}
}

// TestContention: a key held elsewhere is a plain "no", not an error, and
// a Redlock split by two contenders gives neither a quorum.
func TestContention(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, nodes := cluster(t, 5)
	if _, ok, err := b.Acquire(ctx, "k", "a", time.Minute); !ok || err != nil {
		t.Fatalf("a: ok=%v err=%v", ok, err)
	}
	if _, ok, err := b.Acquire(ctx, "k", "b", time.Minute); ok || err != nil {
		t.Fatalf("b while a holds: ok=%v err=%v; want false, nil", ok, err)
	}
	// c holds nodes 1-2 directly, d nodes 3-4: e gets at most node 5.
	for i, f := range nodes[:4] {
		owner := "c"
		if i >= 2 {
			owner = "d"
		}
		if _, ok, _ := f.mem.Acquire(ctx, "split", owner, time.Minute); !ok {
			t.Fatal("setup")
		}
	}
	if _, ok, err := b.Acquire(ctx, "split", "e", time.Minute); ok || err != nil {
		t.Fatalf("split key: ok=%v err=%v; want false, nil", ok, err)
	}
	b.Close()
	if n := holders(nodes, "split", "e"); n != 0 {
		t.Fatalf("the refused contender still holds %d nodes", n)
	}
}

// TestNoValidityLeft: a quorum reached after the TTL is used up is no
// lease; every node is released.
func TestNoValidityLeft(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, nodes := cluster(t, 3)
	var skew atomic.Int64
	b.SetClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	const ttl = time.Second
	for _, n := range nodes { // a node's grant takes as long as the whole TTL
		n.set(func(f *flaky) { f.onAcquire = func() { skew.Store(int64(ttl - drift(ttl) + time.Millisecond)) } })
	}
	_, ok, err := b.Acquire(ctx, "late", "a", ttl)
	var qe *redlock.QuorumError
	if ok || !errors.As(err, &qe) || qe.Elapsed < ttl-drift(ttl) || !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("acquisition that used up its validity: ok=%v err=%v", ok, err)
	}
	b.Close()
	if n := holders(nodes, "late", "a"); n != 0 {
		t.Fatalf("the late acquisition still holds %d nodes", n)
	}
}

func drift(ttl time.Duration) time.Duration {
	return ttl/100 + min(2*time.Millisecond, ttl/4)
}

// TestReleaseReachesEveryNode: a node whose grant was lost in transit
// holds the lock anyway; Release (and the cleanup of a failed
// acquisition) reaches it.
func TestReleaseReachesEveryNode(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, nodes := cluster(t, 3, redlock.WithWaitAll()) // so that every node saw the acquisition when it returns
	nodes[2].set(func(f *flaky) { f.lostReply = true })
	if _, ok, err := b.Acquire(ctx, "k", "a", time.Minute); !ok || err != nil {
		t.Fatalf("acquire: ok=%v err=%v", ok, err)
	}
	if n := holders(nodes, "k", "a"); n != 3 {
		t.Fatalf("holds %d nodes, want 3 (one reply lost)", n)
	}
	nodes[2].set(func(f *flaky) { f.lostReply = false })
	if ok, err := b.Release(ctx, "k", "a"); !ok || err != nil {
		t.Fatalf("release: ok=%v err=%v", ok, err)
	}
	if n := holders(nodes, "k", "a"); n != 0 {
		t.Fatalf("after release %d nodes still hold the lock", n)
	}

	for _, f := range nodes[1:] {
		f.set(func(f *flaky) { f.lostReply = true })
	}
	if _, ok, err := b.Acquire(ctx, "k2", "a", time.Minute); ok || !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("acquire with two lost replies: ok=%v err=%v; want ErrNoQuorum", ok, err)
	}
	for _, f := range nodes[1:] {
		f.set(func(f *flaky) { f.lostReply = false })
	}
	b.Close()
	if n := holders(nodes, "k2", "a"); n != 0 {
		t.Fatalf("the failed acquisition still holds %d nodes", n)
	}
}

// TestSlowNodeDoesNotSlowAcquisition: a node that hangs past the node
// timeout (ignoring its context) costs nothing once a quorum answered,
// and at most the node timeout when every answer is awaited; a grant that
// lands late is released with the lease.
func TestSlowNodeDoesNotSlowAcquisition(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	// The bounds sit halfway between what each outcome takes, so that a
	// descheduled test cannot mistake one for the other: at the quorum
	// (a loopback round trip) or at the node timeout (400 ms) without
	// WithWaitAll; at the node timeout or at the end of the hang (1.2 s)
	// with it.
	const hang, nodeTimeout = 1200 * time.Millisecond, 400 * time.Millisecond
	for _, waitAll := range []bool{false, true} {
		opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeout)}
		limit := nodeTimeout / 2
		if waitAll {
			opts = append(opts, redlock.WithWaitAll())
			limit = (nodeTimeout + hang) / 2
		}
		b, nodes := cluster(t, 5, opts...)
		nodes[4].set(func(f *flaky) { f.delay, f.deaf = hang, true })
		start := time.Now()
		if _, ok, err := b.Acquire(ctx, "k", "a", time.Minute); !ok || err != nil {
			t.Fatalf("waitAll=%v: ok=%v err=%v", waitAll, ok, err)
		}
		if took := time.Since(start); took > limit {
			t.Fatalf("waitAll=%v: acquisition took %v with one node hanging, want at most %v", waitAll, took, limit)
		}
		if ok, err := b.Release(ctx, "k", "a"); !ok || err != nil {
			t.Fatalf("release: ok=%v err=%v", ok, err)
		}
		b.Close() // the hanging calls end, and the late grant is released by then
		if n := holders(nodes, "k", "a"); n != 0 {
			t.Fatalf("waitAll=%v: %d nodes still hold the lock after release", waitAll, n)
		}
	}
}

// TestRetryWaitsForCleanup: a failed acquisition releases late grants in
// the background; a retry by the same owner waits for that, so the
// cleanup never removes the retry's own grants.
func TestRetryWaitsForCleanup(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, nodes := cluster(t, 3)
	for _, f := range nodes[1:] {
		f.set(func(f *flaky) { f.delay, f.deaf = 150*time.Millisecond, true })
	}
	if _, ok, err := b.Acquire(ctx, "k", "a", time.Minute); ok || !errors.Is(err, redlock.ErrNodeTimeout) {
		t.Fatalf("acquire with two hanging nodes: ok=%v err=%v; want ErrNodeTimeout", ok, err)
	}
	for _, f := range nodes[1:] {
		f.set(func(f *flaky) { f.delay = 0 })
	}
	if _, ok, err := b.Acquire(ctx, "k", "a", time.Minute); !ok || err != nil {
		t.Fatalf("retry: ok=%v err=%v", ok, err)
	}
	time.Sleep(200 * time.Millisecond) // past every late answer of the first attempt
	if n := holders(nodes, "k", "a"); n != 3 {
		t.Fatalf("after the retry %d nodes hold the lock, want 3: the first attempt's cleanup undid the retry", n)
	}
}

package redlock_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestFiveNodesKilled: with 5 nodes, 2 killed (SIGKILL) still grant
// locks; 3 killed make TryAcquire fail with ErrNoQuorum at once (within
// the node timeout + 10 ms); once the 3 are back, the same Client takes
// locks again.
func TestFiveNodesKilled(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	srvs := startNodes(t, 5)
	// A node timeout that a healthy loopback node meets even on a busy
	// machine, where the default 50 ms is sometimes missed; killed nodes
	// refuse connections, so they fail well within it.
	const nodeTimeout = 300 * time.Millisecond
	b := dialRedlock(t, srvs, redlock.WithRestartQuarantine(0), redlock.WithNodeTimeout(nodeTimeout))
	c, err := turnstile.New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pair := func(key string) error {
		l, err := c.TryAcquire(ctx, key)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
	if err := pair("all-up"); err != nil {
		t.Fatalf("all nodes up: %v", err)
	}

	srvs[0].Kill()
	srvs[1].Kill()
	for i := range 20 {
		if err := pair("two-killed:" + strconv.Itoa(i)); err != nil {
			t.Fatalf("2 of 5 killed, pair %d: %v", i, err)
		}
	}

	srvs[2].Kill()
	took := make([]time.Duration, 9)
	for i := range took {
		start := time.Now()
		_, err := c.TryAcquire(ctx, "three-killed:"+strconv.Itoa(i))
		took[i] = time.Since(start)
		if !errors.Is(err, redlock.ErrNoQuorum) {
			t.Fatalf("3 of 5 killed: TryAcquire = %v, want ErrNoQuorum", err)
		}
	}
	slices.Sort(took)
	t.Logf("3 of 5 killed: TryAcquire failed after %v (median), %v (max)", took[len(took)/2], took[len(took)-1])
	// The median keeps the bound robust to a stray scheduling pause.
	if limit := nodeTimeout + 10*time.Millisecond; took[len(took)/2] > limit {
		t.Fatalf("3 of 5 killed: TryAcquire took %v (median), want within %v", took[len(took)/2], limit)
	}

	for _, s := range srvs[:3] {
		s.Restart()
	}
	waitFor(t, 10*time.Second, "the Client takes locks again once the nodes are back", func() bool {
		return pair("back") == nil
	})
	for i := range 20 {
		if err := pair("back:" + strconv.Itoa(i)); err != nil {
			t.Fatalf("nodes back, pair %d: %v", i, err)
		}
	}
}

// TestBlackholedMajority: 3 of 5 nodes take requests and never answer
// (a partition, not a refused connection). TryAcquire fails with
// ErrNoQuorum within the node timeout + 10 ms.
func TestBlackholedMajority(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	nodes, holes, heal := partlyProxied(t, ctx, 5, 2)
	defer heal() // before the clients close: they wait for their replies
	// A node timeout that a healthy loopback node meets even on a busy
	// machine, where the default 50 ms is sometimes missed.
	const nodeTimeout = 300 * time.Millisecond
	c := client(t, nodes, redlock.WithNodeTimeout(nodeTimeout))
	for _, hole := range holes {
		hole(time.Hour)
	}
	took := make([]time.Duration, 9)
	for i := range took {
		start := time.Now()
		_, err := c.TryAcquire(ctx, "blackholed:"+strconv.Itoa(i))
		took[i] = time.Since(start)
		var qe *redlock.QuorumError
		if !errors.Is(err, redlock.ErrNoQuorum) || !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNodeTimeout) {
			t.Fatalf("3 of 5 blackholed: TryAcquire = %v, want ErrNoQuorum with node timeouts", err)
		}
		if qe.Yes != 2 || qe.Failed != 3 {
			t.Fatalf("3 of 5 blackholed: %d yes, %d failed; want 2, 3", qe.Yes, qe.Failed)
		}
	}
	slices.Sort(took)
	t.Logf("3 of 5 blackholed: TryAcquire failed after %v (median), %v (max)", took[len(took)/2], took[len(took)-1])
	if took[0] < nodeTimeout {
		t.Fatalf("TryAcquire gave up after %v, before the node timeout %v", took[0], nodeTimeout)
	}
	// It gives up once the node timeout passes, not when the blackholed
	// nodes answer (never): half the timeout again allows for a
	// descheduled waiter.
	if limit := nodeTimeout * 3 / 2; took[len(took)/2] > limit {
		t.Fatalf("3 of 5 blackholed: TryAcquire took %v (median), want within %v", took[len(took)/2], limit)
	}
}

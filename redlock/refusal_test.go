package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestLostQuorumIsNotARefusal: with 3 of 5 nodes killed and the key held
// by another owner on the 2 live ones, no acquisition is "not acquired"
// (ok=false, nil error) — that would tell the caller the key is held
// elsewhere, while no quorum could be reached at all. Every one fails with
// a QuorumError, on the plain lock, its reentrant and read-write kinds,
// through TryAcquire, and for Extend.
func TestLostQuorumIsNotARefusal(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	srvs := startNodes(t, 5)
	b := dialRedlock(t, srvs, redlock.WithRestartQuarantine(0))
	re := locktest.View[driver.Backend](t)(turnstile.Reentrant(b))
	read, write := locktest.Sides[driver.Backend, driver.Backend](t)(turnstile.ReadWrite(b))
	for _, s := range srvs[:3] {
		s.Kill()
	}
	// "other" holds the keys on the 2 live nodes, taken there directly so
	// that no node timeout of a loaded machine can leave one out; the
	// kinds share the nodes' key space, so each gets a key of its own.
	for _, n := range redisNodes(t, srvs[3:]) {
		rn := n.(*redis.Backend)
		_, nodeWrite := locktest.Sides[driver.Backend, driver.Backend](t)(turnstile.ReadWrite(rn))
		nodeReentrant := locktest.View[driver.Backend](t)(turnstile.Reentrant(rn))
		for key, kb := range map[string]driver.Backend{"held": rn, "held-reentrant": nodeReentrant, "held-rw": nodeWrite} {
			if _, ok, err := kb.Acquire(ctx, key, "other", time.Minute); !ok || err != nil {
				t.Fatalf("other takes %s on %s: ok=%v err=%v", key, rn.Name(), ok, err)
			}
		}
	}

	wantQuorumError := func(what string, ok bool, err error) {
		t.Helper()
		var qe *redlock.QuorumError
		if ok || !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNoQuorum) {
			t.Fatalf("%s with 3 of 5 nodes killed and the key held on the 2 live ones: ok=%v err=%v; want a QuorumError", what, ok, err)
		}
		if qe.Yes != 0 || qe.No > 2 || qe.Failed+qe.Pending < 3 {
			t.Fatalf("%s: %+v; want no yes, at most the 2 live nodes' no, the 3 killed nodes failed", what, qe)
		}
	}
	refusals := 0
	for i := range 50 {
		_, ok, err := b.Acquire(ctx, "held", "me", time.Minute)
		if !ok && err == nil {
			refusals++
			continue
		}
		wantQuorumError("Acquire "+strconv.Itoa(i), ok, err)
	}
	if refusals > 0 {
		t.Fatalf("%d of 50 acquisitions said \"not acquired\" (held by someone else) without a quorum of nodes alive", refusals)
	}
	for i := range 5 {
		_, ok, err := re.Acquire(ctx, "held-reentrant", "me", time.Minute)
		wantQuorumError("reentrant Acquire "+strconv.Itoa(i), ok, err)
		_, ok, err = write.Acquire(ctx, "held-rw", "me", time.Minute)
		wantQuorumError("write Acquire "+strconv.Itoa(i), ok, err)
		_, ok, err = read.Acquire(ctx, "held-rw", "me", time.Minute)
		wantQuorumError("read Acquire "+strconv.Itoa(i), ok, err)
		ok, err = b.Extend(ctx, "held", "me", time.Minute)
		wantQuorumError("Extend by a non-holder "+strconv.Itoa(i), ok, err)
	}

	c, err := turnstile.New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 5 {
		if _, err := c.TryAcquire(ctx, "held"); !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, turnstile.ErrNotAcquired) {
			t.Fatalf("TryAcquire with the quorum lost = %v; want ErrNoQuorum, not ErrNotAcquired", err)
		}
	}
}

// TestRefusalFastPath: with every node up, a held key is refused as soon
// as more than N − quorum nodes said no — a node that hangs, or one that
// is down, does not make the refusal wait for the node timeout.
func TestRefusalFastPath(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	srvs := startNodes(t, 5)
	const nodeTimeout = time.Second // a healthy node meets it even on a loaded machine
	nodes := redisNodes(t, srvs[:4])
	addr, slow, heal := slowProxy(t, srvs[4])
	defer heal() // before the clients close: they wait for their replies
	viaProxy, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viaProxy.Close() })
	nodes = append(nodes, viaProxy)
	b, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	// "other" holds the key on every node, taken there directly so that
	// no node timeout of a loaded machine can leave one out.
	for _, n := range nodes {
		if _, ok, err := n.Acquire(ctx, "held", "other", time.Minute); !ok || err != nil {
			t.Fatalf("other takes the key on %s: ok=%v err=%v", driver.Name(n), ok, err)
		}
	}

	refuse := func(what string) {
		t.Helper()
		took := make([]time.Duration, 7)
		for i := range took {
			start := time.Now()
			// An owner of its own each time: a retry by the same owner
			// waits for the cleanup of its last attempt, which follows
			// the hanging node's answer.
			_, ok, err := b.Acquire(ctx, "held", what+strconv.Itoa(i), time.Minute)
			took[i] = time.Since(start)
			if ok || err != nil {
				t.Fatalf("%s: ok=%v err=%v; want a plain refusal", what, ok, err)
			}
		}
		slices.Sort(took)
		t.Logf("%s: refused after %v (median), %v (max)", what, took[len(took)/2], took[len(took)-1])
		// Waiting for the node timeout would take all of it; the median
		// is robust to a stray scheduling pause.
		if limit := nodeTimeout / 2; took[len(took)/2] > limit {
			t.Fatalf("%s: refusal took %v (median), want well within the node timeout %v", what, took[len(took)/2], nodeTimeout)
		}
	}
	refuse("all nodes up")
	slow(time.Hour) // node 5 takes the request and never answers
	refuse("one node hanging")
	srvs[0].Kill()
	refuse("one node hanging, one killed")
}

// TestRefusalOrFailureTable runs every split of 4 nodes (quorum 3) and of
// 5 nodes (quorum 3) into nodes that say yes, say no (the key held by
// another owner, or not held by this one), fail at once, and hang past
// the node timeout, for Acquire and Extend. The result is a grant with a
// quorum of yes, a plain "no" when more than N − quorum said no and a
// quorum answered, and a QuorumError in every other case; the call waits
// for the hanging nodes only when their answers could still decide
// between those.
//
// The cases run at once, each on nodes of its own, so that the whole
// table costs about two node timeouts (the call, then the cleanup that
// Close waits for), not two per case.
func TestRefusalOrFailureTable(t *testing.T) {
	const nodeTimeout = 500 * time.Millisecond
	type split struct{ n, yes, no, failed, hang int }
	var splits []split
	for _, n := range []int{4, 5} {
		for yes := 0; yes <= n; yes++ {
			for no := 0; yes+no <= n; no++ {
				for failed := 0; yes+no+failed <= n; failed++ {
					splits = append(splits, split{n, yes, no, failed, n - yes - no - failed})
				}
			}
		}
	}
	ctx := ctxFor(t, 20*time.Second)
	var wg sync.WaitGroup
	for _, op := range []string{"acquire", "extend"} {
		for _, s := range splits {
			n, quorum := s.n, s.n/2+1
			name := fmt.Sprintf("%s, %d nodes: yes=%d no=%d failed=%d hang=%d", op, n, s.yes, s.no, s.failed, s.hang)
			b, nodes := cluster(t, n, redlock.WithNodeTimeout(nodeTimeout), redlock.WithoutFencing())
			for i, f := range nodes {
				switch {
				case i < s.yes:
					if op == "extend" {
						holdOn(ctx, t, f, "me")
					}
				case i < s.yes+s.no:
					if op == "acquire" {
						holdOn(ctx, t, f, "other")
					}
				case i < s.yes+s.no+s.failed:
					f.set(func(f *flaky) { f.down = true })
				default:
					f.set(func(f *flaky) { f.delay = time.Hour }) // ends with its context, at the node timeout
				}
			}
			wg.Go(func() {
				start := time.Now()
				var ok bool
				var err error
				if op == "acquire" {
					_, ok, err = b.Acquire(ctx, "k", "me", time.Minute)
				} else {
					ok, err = b.Extend(ctx, "k", "me", time.Minute)
				}
				took := time.Since(start)

				var qe *redlock.QuorumError
				switch {
				case s.yes >= quorum:
					if !ok || err != nil {
						t.Errorf("%s: ok=%v err=%v; want granted", name, ok, err)
					}
				case s.no > n-quorum && s.yes+s.no >= quorum:
					if ok || err != nil {
						t.Errorf("%s: ok=%v err=%v; want a plain no: the refusals alone rule a quorum out", name, ok, err)
					}
				default:
					if ok || !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNoQuorum) {
						t.Errorf("%s: ok=%v err=%v; want a QuorumError: failed nodes keep the quorum out of reach", name, ok, err)
					} else if qe.Failed+qe.Pending < 1 {
						t.Errorf("%s: %+v: a QuorumError without a failed or pending node", name, qe)
					}
				}

				// Without the hanging nodes' answers, is the result certain?
				certain := s.yes >= quorum || (s.no > n-quorum && s.yes+s.no >= quorum) ||
					(s.yes+s.hang < quorum && (s.no+s.hang <= n-quorum || s.failed > n-quorum))
				if certain && took >= nodeTimeout {
					t.Errorf("%s: took %v: waited for the node timeout %v though the result was certain", name, took, nodeTimeout)
				}
				if !certain && took < nodeTimeout {
					t.Errorf("%s: took %v: returned before the node timeout %v, while the hanging nodes could still decide the result", name, took, nodeTimeout)
				}
			})
		}
	}
	wg.Wait()
}

// holdOn has owner hold "k" on one node directly.
func holdOn(ctx context.Context, t *testing.T, f *flaky, owner string) {
	t.Helper()
	if _, ok, err := f.mem.Acquire(ctx, "k", owner, time.Minute); !ok || err != nil {
		t.Fatalf("setup: %s takes k on %s: ok=%v err=%v", owner, f.name, ok, err)
	}
}

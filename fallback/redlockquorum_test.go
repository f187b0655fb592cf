package fallback_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestLostRedlockQuorumKeepsBreakerOpen: a Redlock primary whose key is
// held by another owner answers a plain "not acquired" while its nodes
// are up, which never trips the breaker. With a majority of its nodes
// killed (3 of 5; 2 of 4, where the 2 live nodes' refusals alone would
// rule a quorum out) and the key still held on the live ones, every
// acquisition fails with a QuorumError — not "held by someone else" — so
// the breaker opens, and every half-open probe, made with that same held
// key, opens it again: the breaker stays open across many probe periods
// while the quorum is lost, instead of closing on a refusal that no
// quorum gave.
func TestLostRedlockQuorumKeepsBreakerOpen(t *testing.T) {
	for _, nodes := range []int{5, 4} {
		t.Run(strconv.Itoa(nodes)+" nodes", func(t *testing.T) { lostQuorumKeepsBreakerOpen(t, nodes) })
	}
}

func lostQuorumKeepsBreakerOpen(t *testing.T, nodes int) {
	const (
		ttl         = 5 * time.Second // its tenth is the node timeout
		nodeTimeout = 500 * time.Millisecond
		openTimeout = 100 * time.Millisecond
		probes      = 8
	)
	dead := nodes - (nodes/2 + 1) + 1 // one more than a quorum can spare
	ctx := ctxFor(t, 30*time.Second)
	srvs := make([]*testserver.Redis, nodes)
	addrs := make([]string, len(srvs))
	for i := range srvs {
		srvs[i] = testserver.StartRedis(t)
		addrs[i] = srvs[i].Addr()
	}
	// Held by "other" on every node, taken there directly so that no
	// node timeout of a loaded machine can leave one out.
	for _, s := range srvs {
		if _, ok, err := dialRedis(t, s).Acquire(ctx, "held", "other", time.Minute); !ok || err != nil {
			t.Fatalf("other takes the key on %s: ok=%v err=%v", s.Addr(), ok, err)
		}
	}
	primary, err := redlock.Dial(ctx, addrs, rueidis.ClientOption{},
		redlock.WithRestartQuarantine(0), redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatalf("redlock.Dial: %v", err)
	}
	t.Cleanup(func() { _ = primary.Close() })
	rec := &transitions{}
	b, err := fallback.New(primary, dialPostgres(t),
		fallback.WithTripAfter(2), fallback.WithOpenTimeout(openTimeout), fallback.WithGrace(ttl+time.Second),
		fallback.WithPair("quorum-"+strconv.Itoa(nodes)), fallback.WithOnStateChange(rec.record))
	if err != nil {
		t.Fatal(err)
	}

	for i := range 6 {
		if _, ok, err := b.Acquire(ctx, "held", "me", ttl); ok || err != nil {
			t.Fatalf("all nodes up, key held, Acquire %d = %v, %v; want false, nil", i, ok, err)
		}
	}
	if got := b.State(); got != fallback.StateClosed {
		t.Fatalf("after refusals from a healthy Redlock the breaker is %v, want closed", got)
	}

	for _, s := range srvs[:dead] {
		s.Kill()
	}
	count := func(what string) int {
		n := 0
		for _, tr := range rec.list() {
			if strings.HasSuffix(tr, what) {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(15 * time.Second)
	for count("half-open->open") < probes {
		if time.Now().After(deadline) {
			t.Fatalf("only %d failed probes within 15 s; transitions %v", count("half-open->open"), rec.list())
		}
		// While open, the secondary is in its grace and answers "not
		// acquired"; while half-open, this call probes the Redlock.
		_, _, _ = b.Acquire(ctx, "held", "me", ttl)
		if n := count("->closed"); n > 0 {
			t.Fatalf("the breaker closed while %d of %d Redlock nodes were down: transitions %v", dead, nodes, rec.list())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := rec.list(); len(got) == 0 || got[0] != "closed->open" {
		t.Fatalf("transitions %v, want closed->open first", got)
	}
	if got := b.State(); got == fallback.StateClosed {
		t.Fatalf("breaker %v after %d probes with the quorum lost", got, probes)
	}
}

package redlock_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/handofftest"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestForceReleaseShutsOutHandedHolder: a Client hands a Redlock to its
// own waiters without the nodes (tokens T, T+1, T+2 under the Redlock's
// T). An operator's forced release in the middle of the run shuts out the
// lease holding it then, whose token no node saw: its late write to
// fenced storage on a node is refused, as is every token the run could
// have reached (up to T+15), in both guard modes, while the next
// holder's writes pass. The guard is kept on each node in turn; the third
// node held the key for someone else when the run's grant came, with a
// token far below the Redlock's, which never reached that node's fence,
// so its own floor is below the run's tokens.
func TestForceReleaseShutsOutHandedHolder(t *testing.T) {
	srvs, nodes, rl := forcedRedlock(t)
	ctx := ctxFor(t, time.Minute)
	for _, mode := range []struct {
		name string
		opts []fence.Option
	}{
		{"strict", nil},
		{"AllowSameToken", []fence.Option{fence.AllowSameToken()}},
	} {
		for node, srv := range srvs {
			t.Run(fmt.Sprintf("%s/guard on node %d", mode.name, node+1), func(t *testing.T) {
				key := fmt.Sprintf("forced:%s:%d", mode.name, node+1)
				if node == 2 {
					// Nodes 1 and 2 grant the run with tokens an hour
					// above node 3's, which holds the key elsewhere.
					ahead := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro()/16*16, 10)
					for _, s := range srvs[:2] {
						s.MustDo(t, "SET", lockKey(key)+":fence", ahead, "PX", "600000")
					}
					if _, ok, err := nodes[2].Acquire(ctx, key, "elsewhere", time.Minute); !ok || err != nil {
						t.Fatalf("node 3: Acquire = %v, %v", ok, err)
					}
				}
				checkForcedRun(t, rl, guardOn(t, srv, mode.opts...), key)
			})
		}
	}
}

// forcedRedlock starts three nodes and a Redlock over them that restarts
// none of them in quarantine, closed when the test ends.
func forcedRedlock(t *testing.T) ([]*testserver.Redis, []driver.Backend, *redlock.Backend) {
	t.Helper()
	srvs := startNodes(t, 3)
	nodes := redisNodes(t, srvs, redis.WithRestartQuarantine(0))
	rl, err := redlock.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rl.Close() })
	return srvs, nodes, rl
}

// guardOn is fenced storage on srv, through a client of its own closed
// when the test ends.
func guardOn(t *testing.T, srv *testserver.Redis, opts ...fence.Option) *fence.Redis {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	guard, err := fence.NewRedis(rc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return guard
}

// checkForcedRun runs the forced release of a run of handoffs on key:
// a Client takes key through rl, which then removes it by force; guard is
// the fenced storage.
func checkForcedRun(t *testing.T, rl *redlock.Backend, guard *fence.Redis, key string) {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	room := rl.TokenRoom()
	if room < 2 {
		t.Fatalf("TokenRoom = %d: no handoffs without the nodes", room)
	}
	data := fence.DataKey(key, "report")
	c, waiting := handofftest.WaitingClient(t, rl)
	run := handofftest.HandedRun(t, ctx, c, waiting, key, 3, func(l *turnstile.Lease) {
		if err := guard.Set(ctx, key, l.Token(), data, fmt.Sprint("section ", l.Token())); err != nil {
			t.Fatalf("fenced write of the lease with token %d: %v", l.Token(), err)
		}
	})
	held := run[len(run)-1]
	base := run[0].Token()

	t.Logf("run %d..%d", base, held.Token())
	st, err := rl.ForceRelease(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != held.Owner() {
		t.Fatalf("ForceRelease removed %+v; want %s", st, held.Owner())
	}
	last := base - base%room + room - 1 // the last token a run from base can carry
	if st.Token < last {
		t.Errorf("fence floor %d, below the token %d a run of handoffs from %d can reach (the holder's is %d)", st.Token, last, base, held.Token())
	}
	for _, tok := range []uint64{held.Token(), last} {
		var stale *fence.StaleTokenError
		if err := guard.Set(ctx, key, tok, data, "late write"); !errors.As(err, &stale) {
			t.Errorf("late fenced write with token %d after the forced release = %v, want a stale token error", tok, err)
		}
	}

	next, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = next.Release(ctx) }()
	if next.Token() <= st.Token {
		t.Errorf("next token %d, want above the fence floor %d", next.Token(), st.Token)
	}
	if err := guard.Set(ctx, key, next.Token(), data, "next holder"); err != nil {
		t.Errorf("the next holder's fenced write: %v", err)
	}
	if err := guard.Set(ctx, key, held.Token(), data, "late write"); !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("late fenced write with token %d after the next holder's = %v, want ErrStaleToken", held.Token(), err)
	}
}

// TestForceReleaseRaisesGuardOnAFreeNode: a node that does not hold the
// lock when it is removed by force (its grant came late and was undone)
// but whose fence stands above the Redlock's floor (a later token of its
// own) changes nothing itself, guard key included; the Redlock must still
// raise the guard that fenced storage keeps on that node, or the removed
// holder's late write passes there.
func TestForceReleaseRaisesGuardOnAFreeNode(t *testing.T) {
	srvs, _, rl := forcedRedlock(t)
	ctx := ctxFor(t, time.Minute)
	c, err := turnstile.New(rl, turnstile.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key = "forced:free-node"
	l, err := c.Acquire(ctx, key) // retried while a loaded machine delays a node past its timeout
	if err != nil {
		t.Fatal(err)
	}
	guard := guardOn(t, srvs[0])
	data := fence.DataKey(key, "report")
	if err := guard.Set(ctx, key, l.Token(), data, "section"); err != nil {
		t.Fatal(err)
	}
	// Node 1 no longer holds the lock, and its fence has a later token.
	srvs[0].MustDo(t, "DEL", lockKey(key))
	srvs[0].MustDo(t, "SET", lockKey(key)+":fence", strconv.FormatUint(l.Token()+1600, 10), "PX", "600000")

	st, err := rl.ForceRelease(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if st.Token <= l.Token() {
		t.Fatalf("fence floor %d, want above the removed holder's token %d", st.Token, l.Token())
	}
	if err := guard.Set(ctx, key, l.Token()+1, data, "late write"); !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("late fenced write on node 1 with token %d after the forced release = %v, want ErrStaleToken", l.Token()+1, err)
	}
}

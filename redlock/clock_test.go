package redlock_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
)

// scriptCalls is how many scripts srv ran (INFO commandstats).
func scriptCalls(t *testing.T, srv *testserver.Redis) int { return calls(t, srv, "evalsha") }

// calls is how many times srv ran command (INFO commandstats).
func calls(t *testing.T, srv *testserver.Redis, command string) int {
	t.Helper()
	info := srv.MustDo(t, "INFO", "commandstats")
	_, rest, ok := strings.Cut(info, "cmdstat_"+command+":calls=")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(rest, ",")
	calls, err := strconv.Atoi(n)
	if err != nil {
		t.Fatalf("commandstats: %v", err)
	}
	return calls
}

// TestOneTokenEverywhere: every node starts the token of a key new to it
// from the one clock reading Acquire gives them all, so the nodes agree
// on the token and none needs its fence raised: a pair costs one script
// per node to take and one to release.
// With a restart quarantine (the default) too: it reads the client's
// clock reading as well.
func TestOneTokenEverywhere(t *testing.T) {
	for _, quarantine := range []time.Duration{0, 3 * time.Second} {
		t.Run("quarantine="+quarantine.String(), func(t *testing.T) { oneTokenEverywhere(t, quarantine) })
	}
}

func oneTokenEverywhere(t *testing.T, quarantine time.Duration) {
	srvs := startNodes(t, 3)
	// WithWaitAll: every node answers before Acquire returns. A node
	// timeout of a second, with leases of 10 s, or of the quarantine, which
	// bounds them (a node timeout is capped at a tenth of the TTL): a node
	// answering late on a busy machine is not what this test is about.
	ttl := 10 * time.Second
	if quarantine > 0 {
		ttl = quarantine
	}
	b := dialRedlock(t, srvs, redlock.WithWaitAll(), redlock.WithRestartQuarantine(quarantine), redlock.WithNodeTimeout(time.Second))
	ctx := ctxFor(t, time.Minute)
	time.Sleep(quarantine) // the servers have just started
	pair := func(key string) uint64 {
		t.Helper()
		tok, ok, err := b.Acquire(ctx, key, "o", ttl)
		for err != nil && quarantine > 0 && strings.Contains(err.Error(), "quarantine") && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond) // uptime counts whole seconds
			tok, ok, err = b.Acquire(ctx, key, "o", ttl)
		}
		if !ok || err != nil {
			t.Fatalf("acquire %s: ok=%v err=%v", key, ok, err)
		}
		if ok, err := b.Release(ctx, key, "o"); !ok || err != nil {
			t.Fatalf("release %s: ok=%v err=%v", key, ok, err)
		}
		return tok
	}
	pair("warm") // loads the scripts, samples the nodes' clocks
	for i := range 10 {
		key := "one-token:" + strconv.Itoa(i)
		before := make([]int, len(srvs))
		for j, s := range srvs {
			before[j] = scriptCalls(t, s)
		}
		tok := pair(key)
		for j, s := range srvs {
			if got := s.MustDo(t, "GET", lockKey(key)+":fence"); got != strconv.FormatUint(tok, 10) {
				t.Fatalf("key %s: node %d's fence holds %s, the lock's token is %d", key, j+1, got, tok)
			}
			if n := scriptCalls(t, s) - before[j]; n != 2 {
				t.Fatalf("key %s: node %d ran %d scripts for one pair, want 2 (no fence raised)", key, j+1, n)
			}
		}
	}
}

// TestResignationTellsEveryNode: an election's resignation nobody else
// contested sends the release notice on every node, for observers, who
// try nothing (a release sends it only when someone failed to take the
// lock meanwhile).
func TestResignationTellsEveryNode(t *testing.T) {
	srvs := startNodes(t, 3)
	c, err := turnstile.New(dialRedlock(t, srvs, redlock.WithWaitAll(), redlock.WithRestartQuarantine(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxFor(t, time.Minute)
	e, err := c.Election("primary")
	if err != nil {
		t.Fatal(err)
	}
	lead, err := e.Campaign(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	before := make([]int, len(srvs))
	for i, s := range srvs {
		before[i] = calls(t, s, "spublish")
	}
	if err := lead.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	for i, s := range srvs {
		if n := calls(t, s, "spublish") - before[i]; n != 1 {
			t.Errorf("node %d published %d release notices for the resignation, want 1", i+1, n)
		}
	}
}

// TestTokenRoom: a Redlock of Redis nodes leaves the nodes' room between
// its tokens (driver.TokenRoom) when it fences, so a Client hands a hot
// key to its own waiters without the nodes; without fencing, or with a
// node that leaves none, it claims none.
func TestTokenRoom(t *testing.T) {
	srvs := startNodes(t, 3)
	nodes := redisNodes(t, srvs, redis.WithRestartQuarantine(0))
	rl, err := redlock.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if got := rl.TokenRoom(); got != 16 {
		t.Fatalf("TokenRoom = %d, want the nodes' 16", got)
	}
	if r, _ := redlock.New(nodes, redlock.WithoutFencing()); r.TokenRoom() != 0 {
		t.Fatalf("TokenRoom without fencing = %d, want 0", r.TokenRoom())
	}
	mixed, err := redlock.New([]driver.Backend{nodes[0], nodes[1], memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	if mixed.TokenRoom() != 0 {
		t.Fatalf("TokenRoom with a memory node = %d, want 0", mixed.TokenRoom())
	}

	c, err := turnstile.New(rl, turnstile.WithTTL(8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxFor(t, time.Minute)
	before := scriptCalls(t, srvs[0])
	const workers, rounds = 8, 50
	var (
		mu    sync.Mutex // taken only inside the critical section
		order []uint64
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for range rounds {
				l, err := c.Acquire(ctx, "hot")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, l.Token())
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	local := 0
	for i, tok := range order {
		if i > 0 && tok <= order[i-1] {
			t.Fatalf("section %d got token %d after section %d's %d", i, tok, i-1, order[i-1])
		}
		if tok%16 != 0 {
			local++
		}
	}
	scripts := scriptCalls(t, srvs[0]) - before
	t.Logf("%d acquisitions: %d without the nodes; node 1 ran %d scripts", len(order), local, scripts)
	if local == 0 || scripts > len(order)/2 {
		t.Fatalf("%d of %d acquisitions without the nodes, node 1 ran %d scripts: want most without them", local, len(order), scripts)
	}
}

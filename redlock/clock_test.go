package redlock_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
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
	for _, quarantine := range []time.Duration{0, time.Second} {
		t.Run("quarantine="+quarantine.String(), func(t *testing.T) { oneTokenEverywhere(t, quarantine) })
	}
}

func oneTokenEverywhere(t *testing.T, quarantine time.Duration) {
	srvs := startNodes(t, 3)
	// WithWaitAll: every node answers before Acquire returns.
	b := dialRedlock(t, srvs, redlock.WithWaitAll(), redlock.WithRestartQuarantine(quarantine))
	ctx := ctxFor(t, time.Minute)
	time.Sleep(quarantine) // the servers have just started
	pair := func(key string) uint64 {
		t.Helper()
		tok, ok, err := b.Acquire(ctx, key, "o", time.Second)
		for err != nil && quarantine > 0 && strings.Contains(err.Error(), "quarantine") && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond) // uptime counts whole seconds
			tok, ok, err = b.Acquire(ctx, key, "o", time.Second)
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

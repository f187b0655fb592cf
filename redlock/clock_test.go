package redlock_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redlock"
)

// scriptCalls is how many scripts srv ran (INFO commandstats).
func scriptCalls(t *testing.T, srv *testserver.Redis) int {
	t.Helper()
	info := srv.MustDo(t, "INFO", "commandstats")
	_, rest, ok := strings.Cut(info, "cmdstat_evalsha:calls=")
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

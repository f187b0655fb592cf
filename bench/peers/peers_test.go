package peers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSingleServerPeersRefuseSeveralAddresses(t *testing.T) {
	for _, lib := range peers.All() {
		addrs := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
		lk, err := lib.Open(context.Background(), addrs, 1)
		switch {
		case lib.MultiNode && err != nil:
			t.Errorf("%s over %d nodes: %v", lib.Name, len(addrs), err)
		case !lib.MultiNode && !errors.Is(err, workload.ErrUsage):
			t.Errorf("%s over %d nodes: %v, want ErrUsage", lib.Name, len(addrs), err)
		}
		if lk != nil {
			_ = lk.Close()
		}
		if _, err := lib.Open(context.Background(), nil, 1); !errors.Is(err, workload.ErrUsage) {
			t.Errorf("%s without an address: %v, want ErrUsage", lib.Name, err)
		}
	}
}

// acquire takes key through lib on srv, and returns the lock and how
// long it took.
func acquire(t *testing.T, lib workload.Library, addr, key string) (workload.Held, time.Duration) {
	t.Helper()
	lk, err := lib.Open(context.Background(), []string{addr}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Close() })
	// rueidislock holds a lock while the context of the call lasts.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	start := time.Now()
	h, err := lk.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("%s: %v", lib.Name, err)
	}
	return h, time.Since(start)
}

// pttl is key's remaining time to live on srv.
func pttl(t *testing.T, srv *testserver.Redis, key string) time.Duration {
	t.Helper()
	ms, err := strconv.Atoi(srv.MustDo(t, "PTTL", key))
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

// redsync and redislock lock with TTL 8 s; redsync retries a held key
// after its default delay, at least 50 ms.
func TestTTLAndRedsyncDelay(t *testing.T) {
	srv := testserver.StartRedis(t)
	for _, lib := range []workload.Library{peers.Redsync(), peers.Redislock()} {
		key := "ttl:" + lib.Name
		// Held by someone else until the library's first attempt has
		// been refused: the next can only come after its retry delay.
		srv.MustDo(t, "SET", key, "someone-else")
		attempts, err := lockCalls(srv)
		if err != nil {
			t.Fatal(err)
		}
		freed := make(chan error, 1)
		go func() {
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				if n, err := lockCalls(srv); err != nil || n != attempts {
					if err == nil {
						_, err = srv.Do("DEL", key)
					}
					freed <- err
					return
				}
			}
			freed <- errors.New("no attempt to take the lock within 10 s")
		}()
		h, took := acquire(t, lib, srv.Addr(), key)
		if err := <-freed; err != nil {
			t.Fatal(err)
		}
		if d := pttl(t, srv, key); d <= 7*time.Second || d > workload.TTL {
			t.Errorf("%s: PTTL %v, want a little under %v", lib.Name, d, workload.TTL)
		}
		if lib.Name == "redsync" && took < 50*time.Millisecond {
			t.Errorf("redsync took %v to take a lock held until its first attempt: its default retry delay is at least 50 ms", took)
		}
		if err := h.Release(context.Background()); err != nil {
			t.Errorf("%s: release: %v", lib.Name, err)
		}
	}
}

// lockCalls is how many commands that can take a lock srv has run: SET
// (redsync's SET NX) and scripts (redislock's).
func lockCalls(srv *testserver.Redis) (int, error) {
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !slices.Contains([]string{"cmdstat_set", "cmdstat_evalsha", "cmdstat_eval"}, name) {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		c, err := strconv.Atoi(calls)
		if err != nil {
			return 0, fmt.Errorf("commandstats %q: %w", line, err)
		}
		n += c
	}
	return n, nil
}

// rueidislock takes a majority of three keys, valid 5 s (its defaults);
// rueidislock-km1 one key.
func TestRueidislockKeys(t *testing.T) {
	srv := testserver.StartRedis(t)
	for _, c := range []struct {
		lib  workload.Library
		keys int
	}{{peers.Rueidislock(), 3}, {peers.RueidislockKeyMajority1(), 1}} {
		name := "keys-" + c.lib.Name
		h, _ := acquire(t, c.lib, srv.Addr(), name)
		pattern := "rueidislock:*:" + name
		count := func() int {
			n, err := strconv.Atoi(srv.MustDo(t, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", pattern))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		// The keys past the majority are taken in the background.
		deadline := time.Now().Add(2 * time.Second)
		for count() < c.keys && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		if n := count(); n != c.keys {
			t.Errorf("%s: %d keys %s, want %d", c.lib.Name, n, pattern, c.keys)
		}
		if d := pttl(t, srv, "rueidislock:0:"+name); d <= 4*time.Second || d > 5*time.Second {
			t.Errorf("%s: PTTL %v, want a little under 5s", c.lib.Name, d)
		}
		if err := h.Release(context.Background()); err != nil {
			t.Errorf("%s: release: %v", c.lib.Name, err)
		}
	}
}

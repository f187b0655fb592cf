package redlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
)

// slowProxy puts a TCP proxy in front of srv and returns its address,
// a function that delays everything the client sends by latency, and one
// that removes the delay again (delivering what it held back). The proxy
// stops when the test ends.
func slowProxy(t *testing.T, srv *testserver.Redis) (addr string, slow func(latency time.Duration), heal func()) {
	t.Helper()
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(api, "redis", "127.0.0.1:0", srv.Addr())
	if err := p.Start(); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	heal = func() { p.Toxics.ResetToxics(context.Background()) }
	t.Cleanup(func() {
		heal()
		p.Stop()
	})
	slow = func(latency time.Duration) {
		_, err := p.Toxics.AddToxicJson(strings.NewReader(`{"name":"slow","type":"latency","stream":"upstream","attributes":{"latency":` +
			strconv.Itoa(int(latency/time.Millisecond)) + `}}`))
		if err != nil {
			t.Fatalf("add latency: %v", err)
		}
	}
	return p.Listen, slow, heal
}

// proxiedNodes dials each of srvs through a slowProxy of its own and
// returns the Backends, the proxies' slow functions, and a function that
// heals them all, which the test defers: its clients wait for their
// replies when they close.
func proxiedNodes(t *testing.T, ctx context.Context, srvs []*testserver.Redis) (nodes []driver.Backend, slows []func(time.Duration), heal func()) {
	t.Helper()
	var heals []func()
	for _, s := range srvs {
		addr, slow, heal := slowProxy(t, s)
		heals = append(heals, heal)
		n, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			for _, h := range heals {
				h()
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, driver.Backend(n))
		slows = append(slows, slow)
	}
	return nodes, slows, func() {
		for _, h := range slices.Backward(heals) {
			h()
		}
	}
}

// partlyProxied starts n servers and returns Backends of them, the first
// direct of them dialled directly and the others through proxies, with
// what proxiedNodes returns of the proxies: their slow functions and a
// function that heals them all.
func partlyProxied(t *testing.T, ctx context.Context, n, direct int) (nodes []driver.Backend, slows []func(time.Duration), heal func()) {
	t.Helper()
	srvs := startNodes(t, n)
	proxied, slows, heal := proxiedNodes(t, ctx, srvs[direct:])
	return append(redisNodes(t, srvs[:direct]), proxied...), slows, heal
}

// TestSlowNodeBehindProxy: one of three nodes answers only after 250 ms,
// five times the node timeout. Acquisition does not wait for it longer
// than the node timeout (and not at all when it returns early), and its
// SET, which lands after the lease was granted (or even released), is
// removed from that node by the release.
func TestSlowNodeBehindProxy(t *testing.T) {
	const latency = 250 * time.Millisecond
	srvs := startNodes(t, 3)
	proxyAddr, slow, heal := slowProxy(t, srvs[2])
	defer heal() // before the clients close: they wait for their replies
	nodes := redisNodes(t, srvs[:2])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	viaProxy, err := redis.Dial(ctx, rueidis.ClientOption{InitAddress: []string{proxyAddr}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viaProxy.Close() })
	nodes = append(nodes, viaProxy)
	// Load the scripts first: a server that does not know a script yet
	// answers EVALSHA with NOSCRIPT, and the client sends EVAL only after
	// that reply, which would come too late to send anything.
	warm := ctxFor(t, 10*time.Second)
	tok, ok, err := viaProxy.Acquire(warm, "warm-up", "o", time.Second)
	if !ok || err != nil {
		t.Fatalf("warm-up: ok=%v err=%v", ok, err)
	}
	_, _ = viaProxy.RaiseFence(warm, "warm-up", "o", tok)
	_, _ = viaProxy.Extend(warm, "warm-up", "o", time.Second)
	_, _ = viaProxy.Release(warm, "warm-up", "o")
	slow(latency)

	for _, waitAll := range []bool{true, false} {
		name := "early-return"
		opts := []redlock.Option(nil)
		if waitAll {
			name = "wait-all"
			opts = append(opts, redlock.WithWaitAll())
		}
		t.Run(name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			c := client(t, nodes, opts...)
			key := "slow:" + name
			start := time.Now()
			l, err := c.TryAcquire(ctx, key)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("TryAcquire with one slow node: %v", err)
			}
			limit := redlock.DefaultNodeTimeout + 40*time.Millisecond // scheduling noise under -race
			if !waitAll {
				limit = redlock.DefaultNodeTimeout
			}
			if took > limit {
				t.Fatalf("acquisition took %v with a node %v slow, want at most %v", took, latency, limit)
			}
			t.Logf("acquired in %v with a node %v slow", took, latency)
			if waitAll {
				// The SET reaches the slow server after the lease was granted.
				waitFor(t, time.Second, "the late SET lands on the slow server", func() bool { return exists(t, srvs[2], key) })
			} else {
				// Release before it lands: the release must still come after it.
				if exists(t, srvs[2], key) {
					t.Fatal("the SET reached the slow server before its latency passed")
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			waitFor(t, 2*time.Second, "the late SET is released on the slow server", func() bool { return !exists(t, srvs[2], key) })
			time.Sleep(2 * latency) // nothing still on its way re-creates it
			for i, s := range srvs {
				if exists(t, s, key) {
					t.Fatalf("server %d still holds the released lock", i+1)
				}
			}
		})
	}
}

// client returns a Client over a Redlock of nodes (not owned), closed
// when the test ends.
func client(t *testing.T, nodes []driver.Backend, opts ...redlock.Option) *turnstile.Client {
	t.Helper()
	b, err := redlock.New(nodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := turnstile.New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = b.Close()
	})
	return c
}

// waitFor polls cond every 5 ms until it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// faultEnv is what a fault acts on.
type faultEnv struct {
	t    *target
	pool *workers
	ttl  time.Duration
	log  io.Writer
}

// fault is one kind of failure. inject starts it and returns the function
// that heals it (nil: the fault is instantaneous, as a kill).
type fault struct {
	name    string
	desc    string
	applies func(t *target) string // "" or why the fault does not apply
	inject  func(ctx context.Context, env *faultEnv) (heal func() error, err error)
	length  func(ttl time.Duration) time.Duration // how long the fault lasts before it heals
	// long: inject while a holder is in a long hold between its reads and
	// its writes, one that outlasts the fault — the worst moment for a
	// fault that can lose the lock.
	long bool
}

func always(*target) string { return "" }

func needProxies(t *target) string {
	if len(t.proxies) == 0 {
		return "clients cannot be put behind a proxy in this configuration"
	}
	return ""
}

func needMembers(n int) func(*target) string {
	return func(t *target) string {
		if len(t.proxies) < n {
			return fmt.Sprintf("needs %d members behind proxies, the configuration has %d", n, len(t.proxies))
		}
		return ""
	}
}

// faults are the faults, by name.
func faults() map[string]fault {
	list := []fault{
		{
			name: "holder-pause", desc: "the lock holder's process stopped (SIGSTOP) for 2.5 TTLs, then resumed",
			long:    true,
			applies: always,
			inject: func(ctx context.Context, env *faultEnv) (func() error, error) {
				w, err := env.pool.inSection(ctx, "long", 10*env.ttl)
				if err != nil {
					return nil, err
				}
				if err := env.pool.signal(w, syscall.SIGSTOP); err != nil {
					return nil, err
				}
				return func() error { return env.pool.signal(w, syscall.SIGCONT) }, nil
			},
			length: func(ttl time.Duration) time.Duration { return 5 * ttl / 2 },
		},
		{
			name: "holder-kill", desc: "the lock holder's process killed (SIGKILL) mid-section; a new worker replaces it",
			long:    true,
			applies: always,
			inject: func(ctx context.Context, env *faultEnv) (func() error, error) {
				w, err := env.pool.inSection(ctx, "long", 10*env.ttl)
				if err != nil {
					return nil, err
				}
				return nil, env.pool.kill(w)
			},
			length: func(time.Duration) time.Duration { return 0 },
		},
		{
			name: "member-pause", desc: "a server (the primary or leader) stopped (SIGSTOP) for 2 TTLs, then resumed",
			long: true,
			applies: func(t *target) string {
				if t.members[t.primary()].pause == nil {
					return "the launcher cannot pause this server"
				}
				return ""
			},
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				m := env.t.members[env.t.primary()]
				if err := m.pause(); err != nil {
					return nil, err
				}
				return m.resume, nil
			},
			length: func(ttl time.Duration) time.Duration { return 2 * ttl },
		},
		{
			name: "member-kill", desc: "a server (the primary or leader) killed (SIGKILL), restarted a TTL later",
			long: true,
			applies: func(t *target) string {
				if t.members[t.primary()].restart == nil {
					return "the launcher cannot restart this server"
				}
				return ""
			},
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				m := env.t.members[env.t.primary()]
				m.kill()
				return m.restart, nil
			},
			length: func(ttl time.Duration) time.Duration { return ttl },
		},
		{
			name: "latency", desc: "150 ms added each way between the clients and every server, for 2 TTLs",
			long:    true,
			applies: needProxies,
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				return toxics(env.t.proxies, `"type":"latency","attributes":{"latency":150,"jitter":50}`)
			},
			length: func(ttl time.Duration) time.Duration { return 2 * ttl },
		},
		{
			name: "blackhole", desc: "everything between the clients and every server dropped for 2 TTLs (connections stay open)",
			long:    true,
			applies: needProxies,
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				return toxics(env.t.proxies, `"type":"timeout","attributes":{"timeout":0}`)
			},
			length: func(ttl time.Duration) time.Duration { return 2 * ttl },
		},
		{
			name: "reset", desc: "every connection between the clients and the servers reset (TCP RST) for a TTL",
			long:    true,
			applies: needProxies,
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				return toxics(env.t.proxies, `"type":"reset_peer","attributes":{"timeout":0}`)
			},
			length: func(ttl time.Duration) time.Duration { return ttl },
		},
		{
			name: "partition-minority", desc: "the clients cut off from a minority of the members for 2 TTLs",
			long:    true,
			applies: needMembers(3),
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				n := (len(env.t.proxies) - 1) / 2
				return toxics(env.t.proxies[:n], `"type":"timeout","attributes":{"timeout":0}`)
			},
			length: func(ttl time.Duration) time.Duration { return 2 * ttl },
		},
		{
			name: "partition-majority", desc: "the clients cut off from a majority of the members for 2 TTLs",
			long:    true,
			applies: needMembers(3),
			inject: func(_ context.Context, env *faultEnv) (func() error, error) {
				n := len(env.t.proxies)/2 + 1
				return toxics(env.t.proxies[:n], `"type":"timeout","attributes":{"timeout":0}`)
			},
			length: func(ttl time.Duration) time.Duration { return 2 * ttl },
		},
	}
	m := make(map[string]fault, len(list))
	for _, f := range list {
		m[f.name] = f
	}
	return m
}

// faultOrder is the order of faults in the table and in --all.
var faultOrder = []string{"holder-pause", "holder-kill", "member-pause", "member-kill", "latency", "blackhole", "reset", "partition-minority", "partition-majority"}

// toxics adds one toxic to both directions of every proxy in ps and
// returns the function that removes them again.
func toxics(ps []*toxiproxy.Proxy, spec string) (func() error, error) {
	heal := func() error {
		for _, p := range ps {
			p.Toxics.ResetToxics(context.Background())
		}
		return nil
	}
	for _, p := range ps {
		for _, stream := range []string{"upstream", "downstream"} {
			js := `{"name":"chaos-` + stream + `","stream":"` + stream + `",` + spec + `}`
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				_ = heal()
				return nil, fmt.Errorf("toxic on %s: %w", p.Name, err)
			}
		}
	}
	return heal, nil
}

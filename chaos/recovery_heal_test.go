//go:build !race

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// TestNextFaultWaitsForRecovery: a fault that the store recovers from
// only some time after its heal returns (as a replica that must
// synchronise before wait_replicas confirms anything) is not injected
// again before the store has granted after the heal: injected at once,
// the next fault would hold up that grant past the bound, and the check
// would blame the store for the heal before it. The fault resets every
// connection to the server, and its heal lifts the resets 1.5 s after it
// returns, longer than the quiet time before the next fault.
//
// It runs without the race detector, as TestQuick does: its workers are
// processes.
func TestNextFaultWaitsForRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s := settings{Duration: 7 * time.Second, Workers: 2, TTL: 500 * time.Millisecond, Hold: 2 * time.Millisecond, Dir: dir, Log: t.Output()}
	for _, d := range []string{"register", "redis"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := redisproc.Start(filepath.Join(dir, "register"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Kill()
	tg, err := stores()["redis"].start(filepath.Join(dir, "redis"), s.TTL)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.close()
	const lateBy = 1500 * time.Millisecond
	if steady := steadyFor(s.TTL); steady >= lateBy {
		t.Fatalf("the quiet time before a fault (%v) outlasts the late heal (%v): the test would prove nothing", steady, lateBy)
	}
	injected := 0
	f := fault{
		name: "late-heal", applies: always,
		inject: func(_ context.Context, env *faultEnv) (func() error, error) {
			injected++
			var names []string
			for _, p := range env.proxies() {
				for _, stream := range []string{"upstream", "downstream"} {
					name := fmt.Sprintf("late-%d-%s", injected, stream)
					js := `{"name":"` + name + `","stream":"` + stream + `","type":"reset_peer","attributes":{"timeout":0}}`
					if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
						return nil, err
					}
					names = append(names, name)
				}
			}
			return func() error {
				time.AfterFunc(lateBy, func() {
					for _, p := range env.proxies() {
						for _, name := range names {
							_ = p.Toxics.RemoveToxic(context.Background(), name)
						}
					}
				})
				return nil
			}, nil
		},
		// Longer than the bound less the late heal: a second fault
		// injected in the quiet time after the first heal would keep
		// the store from granting until past the bound.
		length: func(time.Duration) time.Duration { return 3 * time.Second },
	}
	bound := recoveryBound(leaseOf(tg, s.TTL))
	if f.length(s.TTL)+lateBy <= bound {
		t.Fatalf("the fault (%v) and its late heal (%v) end within the bound %v: the test would prove nothing", f.length(s.TTL), lateBy, bound)
	}
	r, err := runCell(ctx, s, tg, f, reg.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if r.injected < 2 {
		t.Fatalf("the fault was injected %d times, want at least 2", r.injected)
	}
	if v := r.verdict; v.Unrecovered != 0 {
		t.Errorf("%d of %d heals had no grant within %v (longest %v): the next fault came before the store could grant", v.Unrecovered, r.injected, bound, v.Recovery)
	}
}

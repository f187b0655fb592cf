//go:build unix

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	tsredis "github.com/turnstilelock/turnstile/redis"
)

// The thundering herd: many waiters on one key, each holding
// it briefly.
const (
	herdWaiters    = 2000 // default, in all, spread over the worker processes
	maxHerdWaiters = 20000
	herdProcesses  = 2
	herdHold       = time.Millisecond
	// herdLimit bounds one variant: a herd that has not finished by then
	// is reported as such.
	herdLimit = 20 * time.Second
	// herdMaxCommands is what an acquisition may cost with notifications
	// and coalescing: at most 3 store commands.
	herdMaxCommands = 3.0
)

// herdVariants are the ways of waiting compared, from the worst.
var herdVariants = []struct {
	name, summary string
	naive         bool // a baseline, expected to do badly
}{
	{"fixed-interval", "retry every 10 ms, no jitter, no notices", true},
	{"jitter", "exponential backoff with full jitter, no notices", true},
	{"notify", "release notices, every waiter on its own", true},
	{"notify+coalesce", "release notices and one waiter per process in line (the default)", false},
}

// herdOptions are the Client options of a variant.
func herdOptions(variant string) []turnstile.Option {
	unlimited := turnstile.WithBackoff(turnstile.Exponential{Base: turnstile.DefaultBackoffBase, Cap: turnstile.DefaultBackoffCap, MaxRetries: -1})
	switch variant {
	case "fixed-interval":
		return []turnstile.Option{turnstile.WithBackoff(turnstile.Constant{Interval: 10 * time.Millisecond, MaxRetries: -1}),
			turnstile.WithoutNotifications(), turnstile.WithoutCoalescing()}
	case "jitter":
		return []turnstile.Option{unlimited, turnstile.WithoutNotifications(), turnstile.WithoutCoalescing()}
	case "notify":
		return []turnstile.Option{unlimited, turnstile.WithoutCoalescing()}
	default:
		return []turnstile.Option{unlimited}
	}
}

// herdParams is what a herd worker needs to know.
type herdParams struct {
	Variant string `json:"variant"`
	Key     string `json:"key"`
	Waiters int    `json:"waiters"`
}

// herdTally is what one herd worker saw.
type herdTally struct {
	Acquired int64   `json:"acquired"`
	Failed   int64   `json:"failed"`
	FirstErr string  `json:"first_error,omitempty"`
	WaitsUS  []int64 `json:"waits_us"` // per acquisition: from go to the grant
	Overlaps int64   `json:"overlaps"` // grants seen while this process held it
	Commands int64   `json:"commands"` // store round trips
}

// countingBackend counts the round trips a Client makes to the store:
// acquisitions, releases, renewals and subscriptions to release notices.
type countingBackend struct {
	b     *tsredis.Backend
	calls atomic.Int64
}

func (c *countingBackend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	c.calls.Add(1)
	return c.b.Acquire(ctx, key, owner, ttl)
}

func (c *countingBackend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	c.calls.Add(1)
	return c.b.Extend(ctx, key, owner, ttl)
}

func (c *countingBackend) Release(ctx context.Context, key, owner string) (bool, error) {
	c.calls.Add(1)
	return c.b.Release(ctx, key, owner)
}

func (c *countingBackend) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	c.calls.Add(1)
	return c.b.Released(ctx, key)
}

func (c *countingBackend) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (bool, bool, error) {
	c.calls.Add(1)
	return c.b.ReleaseNotice(ctx, key, owner, n)
}

// TokenRoom forwards the store's room between tokens, so that the
// Client hands the lock to its own next waiter without the store, as it
// does over the store itself.
func (c *countingBackend) TokenRoom() uint64 { return c.b.TokenRoom() }

func (c *countingBackend) Name() string { return c.b.Name() }

var (
	_ driver.Notifier       = (*countingBackend)(nil)
	_ driver.NoticeReleaser = (*countingBackend)(nil)
	_ driver.TokenRoom      = (*countingBackend)(nil)
)

// herdWorker is one process of waiters.
func herdWorker(ctx context.Context, env *environment, spec workerSpec, w *workerLink) (any, error) {
	var p herdParams
	if err := json.Unmarshal(spec.Params, &p); err != nil {
		return nil, err
	}
	b, err := tsredis.New(env.rc)
	if err != nil {
		return nil, err
	}
	counted := &countingBackend{b: b}
	c, err := turnstile.New(counted, append(slices.Clone(env.clientOptions), herdOptions(p.Variant)...)...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := w.ready(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, herdLimit)
	defer cancel()
	start := time.Now()
	var (
		t      herdTally
		mu     sync.Mutex
		inside atomic.Int32
		done   atomic.Int64
		wg     sync.WaitGroup
	)
	for range p.Waiters {
		wg.Go(func() {
			l, err := c.Acquire(ctx, p.Key)
			waited := time.Since(start)
			if err != nil {
				mu.Lock()
				countFailure(&t.Failed, &t.FirstErr, err)
				mu.Unlock()
				return
			}
			if inside.Add(1) != 1 {
				mu.Lock()
				t.Overlaps++
				mu.Unlock()
			}
			time.Sleep(herdHold)
			inside.Add(-1)
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			rerr := l.Release(rctx)
			rcancel()
			mu.Lock()
			t.Acquired++
			t.WaitsUS = append(t.WaitsUS, waited.Microseconds())
			if rerr != nil && t.FirstErr == "" {
				t.FirstErr = rerr.Error()
			}
			mu.Unlock()
			w.progress(done.Add(1))
		})
	}
	wg.Wait()
	t.Commands = counted.calls.Load()
	return &t, nil
}

// runHerd runs the herd once per way of waiting.
func runHerd(ctx context.Context, env *environment) ([]result, error) {
	var rs []result
	for _, v := range herdVariants {
		r, err := runHerdVariant(ctx, env, v.name, v.summary, v.naive)
		if err != nil {
			return rs, fmt.Errorf("%s: %w", v.name, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func runHerdVariant(ctx context.Context, env *environment, variant, summary string, naive bool) (result, error) {
	p := herdParams{Variant: variant, Key: "lock:demo:herd:" + strconv.FormatInt(time.Now().UnixNano(), 36), Waiters: env.herdWaiters / herdProcesses}
	raw, _ := json.Marshal(p)
	specs := make([]workerSpec, herdProcesses)
	for i := range specs {
		specs[i] = workerSpec{Scenario: "herd", Variant: variant, Params: raw}
	}
	waiters := int64(p.Waiters * herdProcesses)
	env.progress("herd %s (%s): %s waiters in %d processes, %v hold each...", variant, summary, num(waiters), herdProcesses, herdHold)
	g, err := startWorkers(ctx, env, specs)
	if err != nil {
		return result{}, err
	}
	defer g.Close()
	start := time.Now()
	g.goAll()
	stop := env.showProgress("herd "+variant, waiters, g.progress)
	tallies := make([]herdTally, herdProcesses)
	ptrs := make([]any, len(tallies))
	for i := range tallies {
		ptrs[i] = &tallies[i]
	}
	err = g.wait(ctx, ptrs...)
	stop()
	if err != nil {
		return result{}, err
	}
	took := time.Since(start)

	var acquired, failed, overlaps, commands int64
	var waits []int64
	firstErr := ""
	for _, t := range tallies {
		acquired += t.Acquired
		failed += t.Failed
		overlaps += t.Overlaps
		commands += t.Commands
		waits = append(waits, t.WaitsUS...)
		if firstErr == "" {
			firstErr = t.FirstErr
		}
	}
	slices.Sort(waits)
	p99 := time.Duration(0)
	if len(waits) > 0 {
		p99 = time.Duration(waits[min(len(waits)-1, len(waits)*99/100)]) * time.Microsecond
	}
	perAcq := 0.0
	if acquired > 0 {
		perAcq = float64(commands) / float64(acquired)
	}
	// The ideal: one hold after the other.
	gap := time.Duration(0)
	if acquired > 0 {
		gap = (took - time.Duration(acquired)*herdHold) / time.Duration(acquired)
	}

	r := result{Variant: variant, Naive: naive}
	finished := acquired == waiters && failed == 0
	r.OK = finished && overlaps == 0 && (naive || variant != "notify+coalesce" || perAcq <= herdMaxCommands)
	switch {
	case overlaps > 0:
		r.Summary = fmt.Sprintf("%d grants while the lock was held in the same process", overlaps)
	case !finished:
		r.Summary = fmt.Sprintf("only %s of %s waiters held the lock within %v; %.1f store commands per acquisition", num(acquired), num(waiters), herdLimit, perAcq)
		if firstErr != "" && !errors.Is(ctx.Err(), context.Canceled) {
			// One line: a joined error has several.
			r.Summary += "; first failure: " + strings.Join(strings.Fields(firstErr), " ")
		}
	default:
		r.Summary = fmt.Sprintf("every waiter held it once in %v (handoff gap %v), p99 wait %v, %.1f store commands per acquisition",
			took.Round(10*time.Millisecond), gap.Round(time.Microsecond), p99.Round(time.Millisecond), perAcq)
		if !r.OK {
			r.Summary += fmt.Sprintf(" (more than %.0f)", herdMaxCommands)
		}
	}
	r.add("waiters", waiters)
	r.add("processes", herdProcesses)
	r.add("hold_ms", herdHold.Milliseconds())
	r.add("acquired", acquired)
	r.add("failed", failed)
	r.add("seconds", took.Seconds())
	r.add("handoff_gap_us", gap.Microseconds())
	r.add("p99_wait_ms", float64(p99.Microseconds())/1000)
	r.add("store_commands", commands)
	r.add("store_commands_per_acquisition", perAcq)
	return r, nil
}

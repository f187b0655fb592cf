package locktest

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// RunRandom is a randomized, fault-injecting check of the Client on a
// store: many goroutines on two or three Clients take, hold, extend and
// release a few keys at random — Acquire, TryAcquire, WithOwner, Release
// (also twice at once, and again after an error), Extend (also while the
// lease is released), ForceRelease, Campaign and Observe, Close — while
// the store wrapper (faults.go) loses replies (the store acted, the call
// fails), delays requests and replies, answers Inspect with an earlier
// answer, pauses renewals past a short TTL, and evicts held locks behind
// their holders' backs. An oracle (random_oracle.go) checks at every
// step that
//
//   - no two holders of a key are valid by their own clocks at once,
//     unless the store removed one (eviction, ForceRelease);
//   - fenced storage (a model, and the store's own where the harness
//     gives one) accepts every write of a holder valid before and after
//     it, so tokens increase in the order of the critical sections, also
//     across ForceRelease, whose returned floor must shut out the late
//     writes of every lease it removed;
//   - every call returns within its context's deadline and a generous
//     slack, and within a few seconds of its Client's Close, and
//     Campaign then returns ErrClosed (never a leadership granted after
//     Close returned);
//   - Observe reports a leader that leads steadily;
//   - no goroutine outlives the scenario (goleak).
//
// Each scenario is a subtest named after what it stresses, with the
// operations and faults that matter made hot. A seed fixes each worker's
// sequence of operations and the faults its own calls meet, and the
// faults of the Client's background calls; the interleaving of the
// goroutines is the scheduler's, so a seed makes a failure likely to
// come back, not certain. Scenarios are built to find what they stress
// in many short runs, not in one lucky one.
//
// Environment:
//
//	TURNSTILE_RANDOM_SEED=N         every run's seed (default: a new one per run)
//	TURNSTILE_RANDOM_DURATION=10m   how long each scenario runs
//	TURNSTILE_RANDOM_SCENARIO=Name  only the scenarios matching this regexp
func RunRandom(t *testing.T, h RandomHarness) {
	if h.New == nil {
		t.Fatal("locktest: RandomHarness.New is nil")
	}
	budget, err := randomBudget(h.Budget)
	if err != nil {
		t.Fatal(err)
	}
	seed, fixed, err := randomSeed()
	if err != nil {
		t.Fatal(err)
	}
	only, err := regexp.Compile(os.Getenv("TURNSTILE_RANDOM_SCENARIO"))
	if err != nil {
		t.Fatalf("locktest: TURNSTILE_RANDOM_SCENARIO: %v", err)
	}
	for _, sc := range scenarios {
		if !only.MatchString(sc.name) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			runScenario(t, &h, sc, seed, budget, fixed)
		})
	}
}

// RandomHarness tells RunRandom how to reach the store under test.
type RandomHarness struct {
	// New returns a backend over the store under test; every call is a
	// new connection to the same store (one per Client of a run). It must
	// be exclusive (not Shared, not a Queuer) and offer Inspector and
	// ForceReleaser.
	New func(t testing.TB) driver.Backend
	// Fence, if set, returns the store's own fenced storage, which the
	// checker writes to beside its model (fence.Redis for Redis), and a
	// function that closes it: one per run.
	Fence func(t testing.TB) (Fence, func())
	// Budget is how long each scenario runs by default (0: 2 s);
	// TURNSTILE_RANDOM_DURATION overrides it.
	Budget time.Duration
	// Package is what to pass to go test to rerun a failure ("." if
	// empty).
	Package string
	// IgnoreGoroutines are goroutines the store's client may leave
	// behind for a while, which the leak check allows.
	IgnoreGoroutines []IgnoreGoroutine
}

// IgnoreGoroutine names goroutines the leak check allows (a goleak
// option, such as goleak.IgnoreAnyFunction).
type IgnoreGoroutine = goleak.Option

// Fence is fenced storage: Write reports whether it accepted a write
// with token for resource.
type Fence interface {
	Write(ctx context.Context, resource string, token uint64) (accepted bool, err error)
}

func randomBudget(def time.Duration) (time.Duration, error) {
	if v := os.Getenv("TURNSTILE_RANDOM_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("locktest: TURNSTILE_RANDOM_DURATION=%q: want a positive duration such as 10m", v)
		}
		return d, nil
	}
	if def > 0 {
		return def, nil
	}
	return 2 * time.Second, nil
}

func randomSeed() (uint64, bool, error) {
	if v := os.Getenv("TURNSTILE_RANDOM_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("locktest: TURNSTILE_RANDOM_SEED=%q: want an unsigned integer", v)
		}
		return n, true, nil
	}
	return uint64(time.Now().UnixNano()) % 1e9, false, nil
}

// runLen is how long one run of a scenario lasts: long enough for its
// leases to cycle many times, short enough for many runs per budget.
const runLen = 700 * time.Millisecond

// runScenario runs sc until the budget is spent or a run fails: with
// seeds seed, seed+1, …, or, to rerun a failure, with seed every time.
func runScenario(t *testing.T, h *RandomHarness, sc *scenario, seed uint64, budget time.Duration, fixed bool) {
	leaks := append([]goleak.Option{goleak.IgnoreCurrent()}, h.IgnoreGoroutines...)
	start := time.Now()
	runs := 0
	var total stats
	for s := seed; runs == 0 || time.Since(start) < budget; {
		runs++
		d := runLen
		if sc.runLen > 0 {
			d = sc.runLen
		}
		msg := runOnce(t, h, sc, s, d, nil, &total)
		if msg != "" {
			t.Logf("runs so far: %v", &total)
			t.Fatalf("%s\nrun %d of %s, seed %d, after %v\nrerun: TURNSTILE_RANDOM_SEED=%d go test -count=1 -run '%s' %s",
				msg, runs, sc.name, s, time.Since(start).Round(time.Millisecond), s, runPattern(t.Name()), pkg(h))
		}
		if !fixed {
			s++ // a rerun repeats its seed: the interleavings differ from run to run
		}
	}
	if err := goleak.Find(leaks...); err != nil {
		t.Fatalf("%s leaked goroutines after %d runs from seed %d: %v", sc.name, runs, seed, err)
	}
	t.Logf("%d runs from seed %d in %v: %v", runs, seed, time.Since(start).Round(time.Millisecond), &total)
}

func pkg(h *RandomHarness) string {
	if h.Package == "" {
		return "."
	}
	return h.Package
}

// runPattern is go test's -run pattern for exactly the test called name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// runOnce runs sc once with seed and returns the first violation, or "".
// choose, if set, makes the workers' choices (a fuzzer's input).
func runOnce(t *testing.T, h *RandomHarness, sc *scenario, seed uint64, d time.Duration, choose func(worker int) chooser, total *stats) string {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := &world{t: t, sc: sc, seed: seed, ctx: ctx, stop: stop,
		background: &lockedChooser{c: newRNG(seed ^ 0xfa17)},
		grants:     make(map[[2]string]time.Time), answers: make(map[string][]driver.LockState), calls: make(map[*call]struct{})}
	if h.Fence != nil {
		f, closeFence := h.Fence(t)
		defer closeFence()
		w.fence = f
	}
	for o, r := range sc.plan {
		w.plan[o] = r
	}
	prefix := fmt.Sprintf("rnd:%s:%d:%d:", sc.name, seed, time.Now().UnixNano()%1e6)
	for i := range sc.keys {
		w.keys = append(w.keys, prefix+"k"+strconv.Itoa(i))
	}
	w.elect = prefix + "lead"
	w.closedAt = make([]atomic.Int64, sc.clients)
	for i := range sc.clients {
		b := h.New(t)
		if b == nil {
			t.Fatal("locktest: RandomHarness.New returned nil")
		}
		w.bases = append(w.bases, b)
		if i == 0 {
			room := uint64(1)
			if r, ok := b.(driver.TokenRoom); ok && r.TokenRoom() > 1 {
				room = r.TokenRoom()
			}
			w.o = newOracle(w, room)
		}
		fb, err := wrap(&faulty{base: b, w: w})
		if err != nil {
			t.Fatal(err)
		}
		c, err := turnstile.New(fb, turnstile.WithTTL(sc.ttl), turnstile.WithInstanceID(fmt.Sprintf("c%d", i)),
			turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 10 * time.Millisecond, MaxRetries: -1}))
		if err != nil {
			t.Fatal(err)
		}
		w.clients = append(w.clients, c)
		e, err := c.Election(w.elect)
		if err != nil {
			t.Fatal(err)
		}
		w.elections = append(w.elections, e)
	}
	if choose == nil {
		choose = func(i int) chooser { return newRNG(seed*1009 + uint64(i)) }
	}
	w.choose = choose
	w.run(d)
	if total != nil {
		total.add(&w.stats)
	}
	return w.failed()
}

// FuzzRandom runs one short run of a scenario whose choices come from
// data: its first byte picks the scenario, the rest feed the workers in
// turn (worker i reads bytes i, i+n, …), and a PRNG seeded with data's
// hash takes over where they run out.
func FuzzRandom(t *testing.T, h RandomHarness, data []byte) {
	if h.New == nil {
		t.Fatal("locktest: RandomHarness.New is nil")
	}
	if len(data) == 0 {
		data = []byte{0}
	}
	sc := scenarios[int(data[0])%len(scenarios)]
	hash := fnv.New64a()
	_, _ = hash.Write(data)
	seed := hash.Sum64()
	rest := data[1:]
	leaks := append([]goleak.Option{goleak.IgnoreCurrent()}, h.IgnoreGoroutines...)
	choose := func(i int) chooser {
		return &bytesChooser{data: rest, next: i, stride: sc.workers + 4, fallback: newRNG(seed + uint64(i))}
	}
	d := runLen
	if sc.runLen > 0 {
		d = sc.runLen
	}
	if msg := runOnce(t, &h, sc, seed, d, choose, nil); msg != "" {
		t.Fatalf("%s\nscenario %s, fuzz input %q", msg, sc.name, data)
	}
	if err := goleak.Find(leaks...); err != nil {
		t.Fatalf("scenario %s leaked goroutines: %v", sc.name, err)
	}
}

// bytesChooser takes its choices from every stride-th byte of data, from
// next on, then from fallback.
type bytesChooser struct {
	data         []byte
	next, stride int
	fallback     chooser
}

func (b *bytesChooser) intn(n int) int {
	if b.next < len(b.data) {
		v := int(b.data[b.next])
		b.next += b.stride
		if n <= 256 {
			return v % n
		}
		return (v<<12 | b.fallback.intn(1<<12)) % n
	}
	return b.fallback.intn(n)
}

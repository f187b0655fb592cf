package locktest

import (
	"fmt"
	"sync"
	"time"
)

// scenario is one subtest of RunRandom: how many Clients, workers and
// keys, which operations each worker does how often, and which faults
// the store injects.
type scenario struct {
	name      string
	clients   int
	workers   int // worker i uses Client i mod clients
	keys      int
	ttl       time.Duration
	plan      map[op]rates
	mix       mix
	evict     [2]time.Duration // evictions every so long (zero: none)
	observers int              // Observe loops, on Clients other than the first when there are several
	closeAt   [2]time.Duration // the first Client closes this far into a run (zero: never)
	onFirst   int              // workers on the first Client; the others go round the rest
	runLen    time.Duration    // one run's length (zero: runLen)
	forcer    [2]time.Duration // an operator's ForceRelease every so long (zero: none)
}

// mix is what a worker does, with relative weights for the operations
// and chances for their variants.
type mix struct {
	acquire, try, owner, force, campaign int
	pause                                [2]time.Duration // between operations
	campaignWait                         float64          // a Campaign that waits as long as the run lasts
	hold                                 [2]time.Duration // critical sections' length
	long                                 float64          // a long one instead, of 300 to 600 ms
	forcePause                           time.Duration    // pause after a ForceRelease
	extend                               float64          // an Extend between writes
	double                               float64          // two Releases at once
	extendDuring                         float64          // an Extend on its way as Release runs
	retry                                float64          // Release again after an error
	noWatchdog                           float64          // a lease without the watchdog
	steady                               float64          // a leader that holds long enough to be observed
}

// scenarios: the first is everything at once at low rates; each of the
// others makes hot the operations and faults of one way to break the
// Client's promises.
var scenarios = []*scenario{
	{
		name: "Mixed", clients: 3, workers: 9, keys: 2, ttl: time.Second, observers: 1,
		plan: map[op]rates{
			opAcquire: {lost: .02, late: .02, slow: .02, fail: .02, delay: 20 * time.Millisecond},
			opExtend:  {lost: .02, late: .05, slow: .02, fail: .02, delay: 20 * time.Millisecond},
			opRenew:   {lost: .02, late: .02, fail: .02, delay: 100 * time.Millisecond},
			opRelease: {lost: .03, late: .02, fail: .02, delay: 10 * time.Millisecond},
			opInspect: {stale: .03, fail: .02},
			// A ForceRelease that fails after removing the lock leaves
			// the holder removed without a floor: fine.
			opForceRelease: {lost: .05, delay: 10 * time.Millisecond},
		},
		mix: mix{acquire: 6, try: 2, owner: 1, force: 1, campaign: 2, campaignWait: .5, hold: [2]time.Duration{0, 20 * time.Millisecond},
			forcePause: 30 * time.Millisecond, extend: .2, double: .1, extendDuring: .1, retry: .5, noWatchdog: .1, steady: .2},
		evict: [2]time.Duration{100 * time.Millisecond, 300 * time.Millisecond},
	},
	{
		// Runs of handoffs without the store on one hot key, and an
		// operator's ForceRelease in the middle of them.
		name: "ForceReleaseDuringHandoffs", clients: 2, workers: 7, keys: 1, ttl: 2 * time.Second, onFirst: 6,
		mix:    mix{acquire: 1, hold: [2]time.Duration{time.Millisecond, 4 * time.Millisecond}},
		forcer: [2]time.Duration{10 * time.Millisecond, 60 * time.Millisecond},
	},
	{
		// Workers that reuse a fixed owner id, as a reentrant owner
		// would, beside workers that wait in the line.
		name: "SharedOwner", clients: 2, workers: 8, keys: 1, ttl: 2 * time.Second,
		mix: mix{acquire: 1, owner: 1, hold: [2]time.Duration{0, 3 * time.Millisecond}},
	},
	{
		// Releases whose reply is lost, retried as Release's doc allows,
		// by workers that pause between their leases: a release often
		// finds nobody waiting and goes to the store, and a waiter may
		// line up before the retry.
		name: "ReleaseRetryAfterLostReply", clients: 2, workers: 6, keys: 1, ttl: 2 * time.Second,
		plan: map[op]rates{opRelease: {lost: .4}},
		mix:  mix{acquire: 1, hold: [2]time.Duration{0, 2 * time.Millisecond}, pause: [2]time.Duration{0, 8 * time.Millisecond}, retry: 1},
	},
	{
		// Two Releases of one lease at once, or the second as the first
		// is on its way to the store (late).
		name: "DoubleRelease", clients: 2, workers: 6, keys: 1, ttl: 2 * time.Second,
		plan: map[op]rates{opRelease: {late: .5, delay: 5 * time.Millisecond}},
		mix:  mix{acquire: 1, hold: [2]time.Duration{0, 2 * time.Millisecond}, pause: [2]time.Duration{0, 5 * time.Millisecond}, double: .5},
	},
	{
		// An Extend that reaches the store late, sent as its lease is
		// released, while successors hold: the store's lock must not
		// end before their leases do.
		name: "ExtendDuringHandoff", clients: 2, workers: 8, keys: 1, ttl: 2 * time.Second, onFirst: 5,
		plan: map[op]rates{opExtend: {late: .7, delay: 10 * time.Millisecond}},
		mix:  mix{acquire: 1, hold: [2]time.Duration{0, 2 * time.Millisecond}, long: .05, extendDuring: .6, noWatchdog: .5},
	},
	{
		// Leaders that lead steadily while Observe meets stale answers.
		name: "ObserveStaleAnswers", clients: 2, workers: 4, keys: 1, ttl: 2 * time.Second, observers: 2, runLen: 2 * time.Second,
		plan: map[op]rates{opInspect: {stale: .1}},
		mix:  mix{campaign: 1, hold: [2]time.Duration{10 * time.Millisecond, 100 * time.Millisecond}, steady: .6, campaignWait: .5},
	},
	{
		// Close while waiters wait in the Client's line and campaigns
		// wait to lead.
		name: "CloseWithWaiters", clients: 2, workers: 8, keys: 1, ttl: 2 * time.Second, onFirst: 6,
		mix:     mix{acquire: 1, campaign: 3, hold: [2]time.Duration{50 * time.Millisecond, 300 * time.Millisecond}, campaignWait: 1},
		closeAt: [2]time.Duration{100 * time.Millisecond, 400 * time.Millisecond},
	},
	{
		// Locks removed behind their holders' backs, and short leases
		// whose renewals stall past their TTL.
		name: "Expiries", clients: 2, workers: 6, keys: 2, ttl: 400 * time.Millisecond,
		plan:  map[op]rates{opRenew: {late: .1, delay: 800 * time.Millisecond}, opExtend: {late: .1, delay: 300 * time.Millisecond}},
		mix:   mix{acquire: 3, try: 1, force: 1, hold: [2]time.Duration{0, 200 * time.Millisecond}, forcePause: 50 * time.Millisecond, extend: .3},
		evict: [2]time.Duration{30 * time.Millisecond, 150 * time.Millisecond},
	},
}

// start starts the run's goroutines on wg.
func (sc *scenario) start(w *world, wg *sync.WaitGroup) {
	for i := range sc.workers {
		ci := i % sc.clients
		if sc.onFirst > 0 {
			ci = 0
			if i >= sc.onFirst {
				ci = 1 + (i-sc.onFirst)%(sc.clients-1)
			}
		}
		ch := &lockedChooser{c: w.choose(i)}
		k := &worker{w: w, id: i, ci: ci, c: w.clients[ci], ch: ch, ctx: withChooser(w.ctx, ch), owner: fmt.Sprintf("worker-%d", i)}
		wg.Go(k.loop)
	}
	for i := range sc.observers {
		ob := &observer{id: i, client: (i + 1) % sc.clients}
		w.mu.Lock()
		w.obs = append(w.obs, ob)
		w.mu.Unlock()
		wg.Go(func() { w.observe(ob) })
	}
	if sc.forcer[1] > 0 {
		ch := &lockedChooser{c: w.choose(sc.workers + 2)}
		k := &worker{w: w, id: sc.workers + 2, ch: ch, ctx: withChooser(w.ctx, ch)}
		wg.Go(k.forcer)
	}
	if sc.evict[1] > 0 {
		ch := &lockedChooser{c: w.choose(sc.workers)}
		wg.Go(func() { w.evict(ch) })
	}
	if sc.closeAt[1] > 0 {
		ch := &lockedChooser{c: w.choose(sc.workers + 1)}
		wg.Go(func() { w.closeFirst(ch) })
	}
}

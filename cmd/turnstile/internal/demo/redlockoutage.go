//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/redact"
)

// The Redlock outage: a Redlock of five Redis nodes is the primary of a
// fallback pair; three of the nodes die and come back. Every duration
// is a multiple of the lease TTL (--outage-ttl).
const (
	outageNodes     = 5
	outageKilled    = 3 // a majority: the two left cannot form a quorum
	outageInstances = 4
	outageKeys      = 2

	defaultOutageTTL = time.Second
	minOutageTTL     = 200 * time.Millisecond
	maxOutageTTL     = 10 * time.Second
	minOutagePhase   = 50 * time.Millisecond
	maxOutagePhase   = time.Hour

	// outageWait is how much longer than expected the demo waits for a
	// phase's event (every breaker open, the first grant of a store)
	// before it gives up on the phase: a busy machine is slow, not wrong.
	outageWait = 30 * time.Second
)

// The phases of the outage, in order.
const (
	phaseNormal     = iota // the Redlock grants
	phaseQuorumLost        // 3 of 5 nodes killed, until every breaker is open
	phaseGrace             // breakers open, the secondary still refuses
	phaseFallback          // the secondary grants
	phaseRestarted         // nodes back, until the Redlock grants again
	phaseRecovered         // the Redlock grants
	outagePhases
)

var outagePhaseNames = [outagePhases]string{"normal", "quorum-lost", "grace", "fallback", "restarted", "recovered"}

// primaryLabel names the Redlock in the figures; the secondary is named
// by its store ("postgres", "redis", ...).
const primaryLabel = "redlock"

// outageConfig is one run of the outage.
type outageConfig struct {
	ttl time.Duration
	// steady is the least time the normal, fallback and recovered phases
	// last; 0: three TTLs.
	steady time.Duration
	// secondary, when not nil, is the store every instance falls back to
	// instead of PostgreSQL (or the demo's Redis), and secondaryName what
	// the output calls it. The tests give the memory backend, whose
	// tokens count up from 1 and so fall below the Redlock's after the
	// switch: the checks must then fail.
	secondary     driver.Backend
	secondaryName string
}

// grace is the fallback's switch grace: the TTL, plus a TTL for how far
// apart two instances' breakers close. On an idle machine that is at
// most the open timeout, a quarter TTL, as each probes at its first
// acquisition after its own timeout; the rest is for drift and a busy
// machine, which delays an instance's next acquisition.
func (c outageConfig) grace() time.Duration       { return 2 * c.ttl }
func (c outageConfig) openTimeout() time.Duration { return c.ttl / 4 }

// phase is the least time the steady phases (normal, fallback,
// recovered) run: each also lasts until its store has granted every key
// and, before a node is killed or restarted, until every instance is
// served by the store the phase is about.
func (c outageConfig) phase() time.Duration {
	if c.steady > 0 {
		return c.steady
	}
	return 3 * c.ttl
}

// hold is how long a holder keeps the lock before its fenced write.
func (c outageConfig) hold() time.Duration { return max(c.ttl/100, time.Millisecond) }

// pause is how long an instance waits after an attempt that got no lock.
func (c outageConfig) pause() time.Duration { return max(c.ttl/200, 500*time.Microsecond) }

// outage is one run of the scenario.
type outage struct {
	env       *environment
	cfg       outageConfig
	nodes     []outageNode
	nodeAddrs []string
	real      bool // redis-server nodes, not in-process ones
	quar      time.Duration
	secLabel  string
	keys      []*outageKey
	register  *fence.Redis
	inst      []*outageInstance

	t0       time.Time
	phase    atomic.Int32
	stopping atomic.Bool

	mu       sync.Mutex // guards the fields below
	stats    [outagePhases]phaseStats
	checks   outageChecks
	failedAt string // why the run stopped before its last phase
}

// runRedlockOutage is the scenario "redlock-outage".
func runRedlockOutage(ctx context.Context, env *environment) ([]result, error) {
	ttl := env.outageTTL
	if ttl == 0 {
		ttl = defaultOutageTTL
	}
	return runOutage(ctx, env, outageConfig{ttl: ttl, steady: env.outagePhase})
}

// runOutage runs the outage's phases and returns one verdict per phase
// and one per check.
func runOutage(ctx context.Context, env *environment, cfg outageConfig) ([]result, error) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	o := &outage{env: env, cfg: cfg, checks: outageChecks{sectionsBy: map[string]int64{}}}
	for i := range o.stats {
		o.stats[i].granted = map[string]int64{}
		o.stats[i].keys = map[string]uint{}
	}
	for i := range outageKeys {
		o.keys = append(o.keys, &outageKey{name: "demo:outage:" + run + ":" + strconv.Itoa(i), lastPhase: -1})
	}
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()

	stop, err := o.startNodes()
	if err != nil {
		return nil, err
	}
	closers = append(closers, stop)
	if o.register, err = fence.NewRedis(env.rc); err != nil {
		return nil, err
	}
	switch {
	case cfg.secondary != nil:
		o.secLabel = cfg.secondaryName
	case env.pool != nil:
		o.secLabel = "postgres"
	default:
		o.secLabel = "redis"
		o.note("redlock-outage: the fallback's secondary is the demo's Redis (%s) instead of PostgreSQL, as the run has none", redact.URL(env.redisURL))
	}
	for i := range outageInstances {
		inst, closeInst, err := o.newInstance(ctx, i)
		if err != nil {
			return nil, err
		}
		closers = append(closers, closeInst)
		o.inst = append(o.inst, inst)
	}
	o.env.progress("redlock-outage: %d instances (goroutines, each with its own Redlock connections, %s backend, fallback breaker and client) take %d keys in turn, hold each %v and write its token to a fenced register on the demo's Redis",
		outageInstances, o.secLabel, outageKeys, cfg.hold())
	o.env.progress("redlock-outage: lease TTL %v, switch grace %v, breaker trips after %d failures and probes every %v, node timeout %v%s",
		cfg.ttl, cfg.grace(), fallback.DefaultTripAfter, cfg.openTimeout(), o.nodeTimeout(), o.quarantineNote())
	if err := o.warmUp(ctx); err != nil {
		return nil, err
	}

	o.t0 = time.Now()
	var wg sync.WaitGroup
	o.begin(phaseNormal, "the Redlock of %d grants", outageNodes)
	for _, inst := range o.inst {
		wg.Go(func() { o.work(ctx, inst) })
	}
	defer func() {
		o.stopping.Store(true)
		wg.Wait()
	}()
	if err := o.phases(ctx); err != nil {
		return nil, err
	}
	o.stopping.Store(true)
	wg.Wait()
	o.end()
	return o.results(), nil
}

// phases drives the outage from the normal phase to the recovered one.
// A phase whose event does not come in time ends the run early: the
// verdicts then say which phase was not reached.
func (o *outage) phases(ctx context.Context) error {
	cfg := o.cfg
	if ok, err := o.steady(ctx, phaseNormal, primaryLabel, true); err != nil || !ok {
		return err
	}

	o.begin(phaseQuorumLost, "SIGKILL %d of the %d nodes", outageKilled, outageNodes)
	killAt := o.since()
	o.each(func(n outageNode) { n.kill() })
	o.say("killed %d of the %d nodes (%s): %d left, a quorum needs %d", outageKilled, outageNodes, o.killedAddrs(), outageNodes-outageKilled, outageNodes/2+1)
	ok, err := o.waitFor(ctx, outageWait, func() bool {
		for _, inst := range o.inst {
			if inst.fb.State() == fallback.StateClosed {
				return false
			}
		}
		return true
	})
	if err != nil || !ok {
		return o.gaveUp(err, "not every instance's breaker opened within %v of the kill", outageWait)
	}
	first, last, _ := o.breakerSpan(func(i *outageInstance) int64 { return i.opened.Load() }, killAt)
	o.mu.Lock()
	st := &o.stats[phaseQuorumLost]
	st.breakersOpen = last
	firstFail := "no attempt failed"
	if st.failed > 0 {
		firstFail = fmt.Sprintf("the first failed %s after the kill", fmtDur(st.firstFail-killAt))
	}
	st.note = fmt.Sprintf("every breaker open %s–%s after the kill; %s", fmtDur(first), fmtDur(last), firstFail)
	o.mu.Unlock()
	o.say("every instance's breaker is open (%s–%s after the kill); %s", fmtDur(first), fmtDur(last), firstFail)

	o.begin(phaseGrace, "%s refuses new locks for the %v grace", o.secLabel, cfg.grace())
	ok, err = o.waitFor(ctx, cfg.grace()+outageWait, func() bool { return o.granted(phaseGrace, o.secLabel) > 0 })
	if err != nil || !ok {
		return o.gaveUp(err, "%s granted nothing within %v of the breakers opening", o.secLabel, cfg.grace()+outageWait)
	}
	o.noteAndSay(phaseGrace, "%s granted its first lock %s after the last breaker opened", o.secLabel, fmtDur(o.since()-killAt-last))

	o.begin(phaseFallback, "%s grants", o.secLabel)
	if ok, err := o.steady(ctx, phaseFallback, o.secLabel, false); err != nil || !ok {
		return err
	}

	o.begin(phaseRestarted, "restart the %d nodes", outageKilled)
	restartAt := o.since()
	var mu sync.Mutex
	var restartErr error
	o.each(func(n outageNode) {
		if err := n.restart(); err != nil {
			mu.Lock()
			restartErr = errors.Join(restartErr, err)
			mu.Unlock()
		}
	})
	if restartErr != nil {
		return restartErr
	}
	o.say("restarted the %d nodes on their addresses, without their data%s", outageKilled, o.quarantineAfterRestart())
	bound := o.quar + cfg.openTimeout() + cfg.grace() + outageWait
	ok, err = o.waitFor(ctx, bound, func() bool { return o.granted(phaseRestarted, primaryLabel) > 0 })
	if err != nil || !ok {
		return o.gaveUp(err, "the Redlock granted nothing within %v of the restart", bound)
	}
	first, last, closed := o.breakerSpan(func(i *outageInstance) int64 { return i.closed.Load() }, restartAt)
	o.noteAndSay(phaseRestarted, "%d of %d breakers closed %s–%s after the restart; the Redlock granted again %s after it", closed, outageInstances, fmtDur(first), fmtDur(last), fmtDur(o.since()-restartAt))

	o.begin(phaseRecovered, "the Redlock grants again")
	_, err = o.steady(ctx, phaseRecovered, primaryLabel, true)
	return err
}

// steady runs steady phase ph for the phase time, and then until store
// has granted every key in it and every instance is served by store
// outside its grace (the Redlock when onPrimary): a busy machine can make
// a healthy Redlock miss its node timeouts and open a breaker, and the
// outage starts from, and ends in, the state it is about. It reports
// false when that took longer than outageWait more.
func (o *outage) steady(ctx context.Context, ph int, store string, onPrimary bool) (bool, error) {
	if err := sleepCtx(ctx, o.cfg.phase()); err != nil {
		return false, err
	}
	all := uint(1)<<len(o.keys) - 1
	ok, err := o.waitFor(ctx, outageWait, func() bool {
		o.mu.Lock()
		keys := o.stats[ph].keys[store]
		o.mu.Unlock()
		if keys != all {
			return false
		}
		for _, inst := range o.inst {
			_, inGrace := inst.fb.Serving()
			if inGrace || (inst.fb.State() == fallback.StateClosed) != onPrimary {
				return false
			}
		}
		return true
	})
	if err != nil || ok {
		return ok, err
	}
	return false, o.gaveUp(nil, "%s did not grant every key, with every instance served by it, within %v of the phase's %v", store, outageWait, o.cfg.phase())
}

// gaveUp records why the run stopped early; an ended context is
// returned as the error it is.
func (o *outage) gaveUp(err error, format string, args ...any) error {
	if err != nil {
		return err
	}
	why := fmt.Sprintf(format, args...)
	o.mu.Lock()
	o.failedAt = why
	o.mu.Unlock()
	o.say("giving up: %s", why)
	return nil
}

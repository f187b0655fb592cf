//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/postgres"
	tsredis "github.com/turnstilelock/turnstile/redis"
	"github.com/turnstilelock/turnstile/redlock"
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

// outageNode is one Redis node of the Redlock, which the demo kills and
// restarts.
type outageNode interface {
	addr() string
	kill()          // SIGKILL, or close an in-process node
	restart() error // on the same address, without the data
	stop()
}

type procNode struct{ s *redisproc.Server }

func (n procNode) addr() string   { return n.s.Addr() }
func (n procNode) kill()          { n.s.Kill() }
func (n procNode) restart() error { return n.s.Restart() }
func (n procNode) stop()          { n.s.Kill() }

type miniNode struct{ m *miniredis.Miniredis }

func (n miniNode) addr() string { return n.m.Addr() }
func (n miniNode) kill()        { n.m.Close() }

// restart forgets the data, as a restart of redis-server without
// persistence does.
func (n miniNode) restart() error { n.m.FlushAll(); return n.m.Restart() }
func (n miniNode) stop()          { n.m.Close() }

// grantStore is one store of an instance's fallback pair. It notes which
// store granted each lease, by owner, for the figures of the phases.
type grantStore struct {
	driver.Backend
	label  string
	grants *sync.Map // owner → label
}

// Name implements driver.Namer.
func (g *grantStore) Name() string { return driver.Name(g.Backend) }

// Acquire implements driver.Backend.
func (g *grantStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	token, ok, err := g.Backend.Acquire(ctx, key, owner, ttl)
	if ok && err == nil {
		g.grants.Store(owner, g.label)
	}
	return token, ok, err
}

// outageInstance is one service instance: its own Redlock connections,
// secondary backend, fallback breaker and Client.
type outageInstance struct {
	name   string
	index  int
	rl     *redlock.Backend // the primary, for the warm-up outside the breaker
	fb     *fallback.Backend
	client *turnstile.Client
	grants sync.Map
	// opened and closed are when the breaker last opened and closed, in
	// nanoseconds since the start; 0: never.
	opened, closed atomic.Int64
}

// phaseStats are the figures of one phase. An attempt counts in the
// phase in which it began.
type phaseStats struct {
	start, end    time.Duration // since the start
	began, ended  bool
	granted       map[string]int64 // by store label
	keys          map[string]uint  // by store label: bit i set when key i was granted
	busy          int64            // not acquired: held by another instance, or in the grace
	failed        int64
	releaseFailed int64
	grantLat      []time.Duration
	failLat       []time.Duration
	firstFail     time.Duration // since the start; valid when failed > 0
	firstErr      string
	note          string // what happened, for the summary
}

// outageKey is a lock key with the token of the last critical section
// that began on it.
type outageKey struct {
	mu        sync.Mutex
	name      string
	last      uint64
	lastStore string
	lastPhase int
}

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

	mu    sync.Mutex // guards the fields below
	stats [outagePhases]phaseStats
	// The checks.
	sections        int64
	sectionsBy      map[string]int64
	lateStarts      int64 // leases that ended before their critical section began
	tokenViolations int64
	firstViolation  string
	accepted        int64
	staleRefused    int64
	currentRefused  int64
	firstRefusal    string
	writeErrors     int64
	firstWriteErr   string
	failedAt        string // why the run stopped before its last phase
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
	o := &outage{env: env, cfg: cfg, sectionsBy: map[string]int64{}}
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

// startNodes starts the five Redis nodes: redis-server processes when
// installed (and not --in-process), in-process ones otherwise. It returns
// what stops them.
func (o *outage) startNodes() (stop func(), err error) {
	o.real = !o.env.inProcess && redisproc.Available()
	var mu sync.Mutex
	stopAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range o.nodes {
			n.stop()
		}
	}
	if !o.real {
		for range outageNodes {
			m := miniredis.NewMiniRedis()
			// Lock TTLs pass with the wall clock, as on a real server.
			m.ClockTTL(true)
			if err := m.StartAddr("127.0.0.1:0"); err != nil {
				stopAll()
				return nil, fmt.Errorf("start in-process redis: %w", err)
			}
			o.nodes = append(o.nodes, miniNode{m})
		}
		why := "redis-server is not installed; install it with: " + redisproc.InstallHint
		if o.env.inProcess {
			why = "as --in-process asks"
		}
		o.note("redlock-outage: %d in-process Redis nodes (miniredis) on %s instead of redis-server processes, %s; a node is killed by closing it and restarted empty on its address; no restart quarantine (miniredis has no INFO server)",
			outageNodes, strings.Join(o.addrs(), ", "), why)
		return stopAll, nil
	}
	dir, err := os.MkdirTemp("", "turnstile-demo-redlock-")
	if err != nil {
		return nil, err
	}
	stop = func() {
		stopAll()
		_ = os.RemoveAll(dir)
	}
	o.env.progress("redlock-outage: starting %d redis-server nodes on free loopback ports...", outageNodes)
	o.nodes = make([]outageNode, outageNodes)
	var errs []error
	var wg sync.WaitGroup
	for i := range outageNodes {
		wg.Go(func() {
			d := filepath.Join(dir, "node"+strconv.Itoa(i+1))
			err := os.Mkdir(d, 0o700)
			var s *redisproc.Server
			if err == nil {
				s, err = redisproc.Start(d)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			o.nodes[i] = procNode{s}
		})
	}
	wg.Wait()
	o.nodes = slices.DeleteFunc(o.nodes, func(n outageNode) bool { return n == nil })
	if len(errs) > 0 {
		stop()
		return nil, fmt.Errorf("start the Redlock's nodes: %w", errors.Join(errs...))
	}
	// Each node refuses locks for a TTL after its process started, as a
	// Redlock's nodes must: a restarted node has forgotten the locks it
	// granted.
	o.quar = o.cfg.ttl
	o.env.progress("redlock-outage: %d redis-server nodes on %s (started for this scenario)", outageNodes, strings.Join(o.addrs(), ", "))
	return stop, nil
}

// addrs are the nodes' addresses, noted when they started: an
// in-process node that is down has none.
func (o *outage) addrs() []string {
	if o.nodeAddrs == nil {
		for _, n := range o.nodes {
			o.nodeAddrs = append(o.nodeAddrs, n.addr())
		}
	}
	return o.nodeAddrs
}

func (o *outage) killedAddrs() string { return strings.Join(o.addrs()[:outageKilled], ", ") }

// each runs f on the nodes that die, at once: a majority fails together.
func (o *outage) each(f func(outageNode)) {
	var wg sync.WaitGroup
	for _, n := range o.nodes[:outageKilled] {
		wg.Go(func() { f(n) })
	}
	wg.Wait()
}

// nodeTimeout is the Redlock's node timeout: a tenth of the TTL, the
// most a call allows.
func (o *outage) nodeTimeout() time.Duration { return o.cfg.ttl / 10 }

func (o *outage) quarantineNote() string {
	if o.quar == 0 {
		return ", no restart quarantine"
	}
	return fmt.Sprintf(", restart quarantine %v", o.quar)
}

func (o *outage) quarantineAfterRestart() string {
	if o.quar == 0 {
		return ""
	}
	return fmt.Sprintf("; each refuses locks for its %v restart quarantine", o.quar)
}

// newInstance connects one instance to the nodes and the secondary.
func (o *outage) newInstance(ctx context.Context, i int) (inst *outageInstance, closeAll func(), err error) {
	inst = &outageInstance{name: "instance-" + strconv.Itoa(i+1), index: i}
	var closers []func()
	closeAll = func() {
		for j := len(closers) - 1; j >= 0; j-- {
			closers[j]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// RESP2 for the in-process nodes: see startEnv.
	// The node timeout is the longest a lease's TTL allows, so that a
	// busy machine's slow answers are not taken for dead nodes.
	//
	// WithWaitAll: without it, an acquisition that hears "held" from the
	// two live nodes and one failure returns "not acquired" before the
	// other two dead nodes have failed, and the breaker takes that for a
	// healthy primary. A probe meets such a key whenever another
	// instance's probe holds it on the live nodes, so the breakers would
	// close one by one while the quorum is still lost, further apart than
	// the grace allows. Waiting for every node costs nothing here: dead
	// nodes refuse the connection at once.
	rl, err := redlock.Dial(dctx, o.addrs(), rueidis.ClientOption{AlwaysRESP2: !o.real},
		redlock.WithRestartQuarantine(o.quar), redlock.WithNodeTimeout(o.nodeTimeout()), redlock.WithWaitAll())
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = rl.Close() })
	inst.rl = rl

	var second driver.Backend
	switch {
	case o.cfg.secondary != nil:
		second = o.cfg.secondary
	case o.env.pool != nil:
		cc, err := pgx.ParseConfig(o.env.pgURL)
		if err != nil {
			return nil, nil, redact.Error(fmt.Errorf("postgres %s: %w", redact.URL(o.env.pgURL), err), o.env.pgURL)
		}
		pb, err := postgres.Dial(dctx, cc, postgres.WithConns(2))
		if err != nil {
			return nil, nil, redact.Error(err, o.env.pgURL)
		}
		closers = append(closers, func() { _ = pb.Close() })
		second = pb
	default:
		rb, err := tsredis.New(o.env.rc)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { _ = rb.Close() })
		second = rb
	}

	inst.fb, err = fallback.New(
		&grantStore{Backend: rl, label: primaryLabel, grants: &inst.grants},
		&grantStore{Backend: second, label: o.secLabel, grants: &inst.grants},
		fallback.WithGrace(o.cfg.grace()), fallback.WithOpenTimeout(o.cfg.openTimeout()),
		fallback.WithOnStateChange(func(from, to fallback.State) { o.breakerChanged(inst, from, to) }))
	if err != nil {
		return nil, nil, err
	}
	opts := append(slices.Clone(o.env.clientOptions), turnstile.WithTTL(o.cfg.ttl), turnstile.WithInstanceID(inst.name))
	if inst.client, err = turnstile.New(inst.fb, opts...); err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { _ = inst.client.Close() })
	return inst, closeAll, nil
}

// breakerChanged runs under an instance's breaker lock: it notes the
// time and says so, and must return quickly.
func (o *outage) breakerChanged(inst *outageInstance, from, to fallback.State) {
	now := int64(o.since())
	switch {
	case from == fallback.StateClosed && to == fallback.StateOpen:
		inst.opened.Store(now)
		o.say("%s: breaker open after %d consecutive failures; %s grants once the %v grace has passed", inst.name, fallback.DefaultTripAfter, o.secLabel, o.cfg.grace())
	case to == fallback.StateClosed:
		inst.closed.Store(now)
		o.say("%s: breaker closed, its probe of the Redlock succeeded; the Redlock grants once the %v grace has passed", inst.name, o.cfg.grace())
	}
}

// breakerSpan is how long after since the first and the last instance's
// breaker changed (by at), and how many changed after since.
func (o *outage) breakerSpan(at func(*outageInstance) int64, since time.Duration) (first, last time.Duration, n int) {
	for _, inst := range o.inst {
		d := time.Duration(at(inst)) - since
		if d < 0 {
			continue
		}
		if n == 0 || d < first {
			first = d
		}
		last = max(last, d)
		n++
	}
	return first, last, n
}

// warmUp takes and releases the keys on every instance's Redlock,
// outside the breakers, until they are granted: fresh nodes load the
// scripts on their first calls, and refuse locks during their restart
// quarantine (which a Redis node counts per key's hash slot, from the
// first acquisition when its process has just started); a breaker would
// count either as failures.
func (o *outage) warmUp(ctx context.Context) error {
	if o.quar > 0 {
		o.env.progress("redlock-outage: waiting out the fresh nodes' %v restart quarantine...", o.quar)
	}
	wctx, cancel := context.WithTimeout(ctx, o.quar+outageWait)
	defer cancel()
	for _, inst := range o.inst {
		owner := "warm-up/" + inst.name
		for _, key := range o.keys {
			for {
				_, ok, err := inst.rl.Acquire(wctx, key.name, owner, o.cfg.ttl)
				if err == nil && ok {
					_, _ = inst.rl.Release(wctx, key.name, owner)
					break
				}
				if wctx.Err() != nil {
					if err := ctx.Err(); err != nil {
						return err
					}
					return fmt.Errorf("the Redlock granted no lock within %v of starting (last: %v)", o.quar+outageWait, err)
				}
				_ = sleepCtx(wctx, 20*time.Millisecond)
			}
		}
	}
	return nil
}

// work is one instance's loop: take a key, hold it, write its token to
// the fenced register, release it; until the run stops.
func (o *outage) work(ctx context.Context, inst *outageInstance) {
	for n := inst.index; !o.stopping.Load() && ctx.Err() == nil; n++ {
		ki := n % len(o.keys)
		key := o.keys[ki]
		ph := int(o.phase.Load())
		t0 := time.Now()
		l, err := inst.client.TryAcquire(ctx, key.name)
		lat := time.Since(t0)
		switch {
		case err == nil:
			label, _ := inst.grants.LoadAndDelete(l.Owner())
			store, _ := label.(string)
			o.mu.Lock()
			st := &o.stats[ph]
			st.granted[store]++
			st.keys[store] |= 1 << ki
			st.grantLat = append(st.grantLat, lat)
			o.mu.Unlock()
			o.critical(ctx, key, l, store, ph)
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, turnstile.ErrNotAcquired):
			o.mu.Lock()
			o.stats[ph].busy++
			o.mu.Unlock()
		default:
			o.mu.Lock()
			st := &o.stats[ph]
			if st.failed == 0 {
				st.firstFail, st.firstErr = o.since(), err.Error()
			}
			st.failed++
			st.failLat = append(st.failLat, lat)
			o.mu.Unlock()
		}
		_ = sleepCtx(ctx, o.cfg.pause())
	}
}

// critical is one critical section: it checks that the lease's token is
// above the last one of a critical section of the key, holds the lock,
// writes the token through the fenced register, and releases.
func (o *outage) critical(ctx context.Context, key *outageKey, l *turnstile.Lease, store string, ph int) {
	token := l.Token()
	key.mu.Lock()
	// A lease that ended before its critical section began is no holder;
	// a later one may already have begun.
	if l.Validity() == 0 {
		key.mu.Unlock()
		o.mu.Lock()
		o.lateStarts++
		o.mu.Unlock()
	} else {
		o.mu.Lock()
		o.sections++
		o.sectionsBy[store]++
		if token <= key.last {
			o.tokenViolations++
			if o.firstViolation == "" {
				o.firstViolation = fmt.Sprintf("%s: token %d from %s (%s) after %d from %s (%s)",
					key.name, token, store, outagePhaseNames[ph], key.last, key.lastStore, outagePhaseNames[key.lastPhase])
			}
		}
		o.mu.Unlock()
		key.last, key.lastStore, key.lastPhase = token, store, ph
		key.mu.Unlock()
	}

	_ = sleepCtx(ctx, o.cfg.hold())
	err := o.register.Set(ctx, key.name, token, fence.DataKey(key.name, "register"), strconv.FormatUint(token, 10))
	current := l.Validity() > 0 // after the write: a holder that was still current when refused
	o.mu.Lock()
	switch {
	case err == nil:
		o.accepted++
	case errors.Is(err, fence.ErrStaleToken) && current:
		o.currentRefused++
		if o.firstRefusal == "" {
			o.firstRefusal = fmt.Sprintf("token %d from %s (%s), %v of its lease left: %v", token, store, outagePhaseNames[ph], l.Validity().Round(time.Millisecond), err)
		}
	case errors.Is(err, fence.ErrStaleToken):
		o.staleRefused++
	case ctx.Err() != nil:
	default:
		o.writeErrors++
		if o.firstWriteErr == "" {
			o.firstWriteErr = err.Error()
		}
	}
	o.mu.Unlock()
	if err := l.Release(ctx); err != nil && ctx.Err() == nil {
		o.mu.Lock()
		o.stats[ph].releaseFailed++
		o.mu.Unlock()
	}
}

// since is the time since the instances started.
func (o *outage) since() time.Duration { return time.Since(o.t0) }

// say writes a progress line stamped with the time since the start.
func (o *outage) say(format string, args ...any) {
	o.env.progress("redlock-outage: +%.3fs "+format, append([]any{o.since().Seconds()}, args...)...)
}

// note says what the scenario substituted, now and under the verdicts.
func (o *outage) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	o.env.progress("%s", s)
	o.env.notes = append(o.env.notes, s)
}

func (o *outage) noteAndSay(ph int, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	o.mu.Lock()
	o.stats[ph].note = s
	o.mu.Unlock()
	o.say("%s", s)
}

// begin ends the current phase, says what it did, and starts phase ph.
func (o *outage) begin(ph int, format string, args ...any) {
	now := o.since()
	o.mu.Lock()
	if ph > 0 {
		prev := &o.stats[ph-1]
		prev.end, prev.ended = now, true
	}
	o.stats[ph].start, o.stats[ph].began = now, true
	o.mu.Unlock()
	if ph > 0 {
		o.say("phase %s done: %s", outagePhaseNames[ph-1], o.figures(ph-1))
	}
	o.phase.Store(int32(ph))
	o.say("phase %s: "+format, append([]any{outagePhaseNames[ph]}, args...)...)
}

// end ends the last phase that began.
func (o *outage) end() {
	now := o.since()
	ph := int(o.phase.Load())
	o.mu.Lock()
	o.stats[ph].end = now
	// The last phase ended as planned only if the run was not cut short.
	o.stats[ph].ended = o.failedAt == ""
	o.mu.Unlock()
	o.say("phase %s done: %s", outagePhaseNames[ph], o.figures(ph))
}

// waitFor polls cond until it holds, for at most d.
func (o *outage) waitFor(ctx context.Context, d time.Duration, cond func() bool) (bool, error) {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return false, err
		}
	}
	return true, nil
}

// granted is how many locks store granted to attempts begun in phase ph.
func (o *outage) granted(ph int, store string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stats[ph].granted[store]
}

// figures says in one line what phase ph did.
func (o *outage) figures(ph int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := &o.stats[ph]
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", fmtDur(st.end-st.start))
	b.WriteString(o.grantedWords(st))
	if len(st.grantLat) > 0 {
		fmt.Fprintf(&b, ", acquire p50 %s p99 %s", fmtDur(percentile(st.grantLat, 0.5)), fmtDur(percentile(st.grantLat, 0.99)))
	}
	fmt.Fprintf(&b, "; %s failed", num(st.failed))
	if st.failed > 0 {
		fmt.Fprintf(&b, " in p50 %s p99 %s max %s (TTL %v)", fmtDur(percentile(st.failLat, 0.5)), fmtDur(percentile(st.failLat, 0.99)), fmtDur(slices.Max(st.failLat)), o.cfg.ttl)
	}
	fmt.Fprintf(&b, "; %s not acquired (held, or in the grace)", num(st.busy))
	if st.releaseFailed > 0 {
		fmt.Fprintf(&b, "; %s releases failed", num(st.releaseFailed))
	}
	return b.String()
}

// grantedWords is "N acquisitions, by redlock 5 and postgres 7".
func (o *outage) grantedWords(st *phaseStats) string {
	var total int64
	var by []string
	for _, s := range []string{primaryLabel, o.secLabel} {
		if n := st.granted[s]; n > 0 {
			total += n
			by = append(by, s+" "+num(n))
		}
	}
	what := "acquisitions"
	if total == 1 {
		what = "acquisition"
	}
	switch {
	case total == 0:
		return "0 acquisitions"
	case len(by) == 1:
		return fmt.Sprintf("%s %s, all by %s", num(total), what, strings.Fields(by[0])[0])
	}
	return fmt.Sprintf("%s %s (%s)", num(total), what, strings.Join(by, ", "))
}

// results are the verdicts: one per phase (reached, and its store
// granted where it should), then the token and fence checks.
func (o *outage) results() []result {
	o.mu.Lock()
	defer o.mu.Unlock()
	var rs []result
	for ph := range outagePhases {
		st := &o.stats[ph]
		r := result{Variant: outagePhaseNames[ph]}
		if !st.began {
			r.Summary = "not reached: " + o.failedAt
			r.add("reached", false)
			rs = append(rs, r)
			continue
		}
		reached := st.ended
		var want string // the store that must have granted in this phase
		switch ph {
		case phaseNormal, phaseRecovered:
			want = primaryLabel
		case phaseFallback:
			want = o.secLabel
		}
		r.OK = reached && (want == "" || st.granted[want] > 0)
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %s", fmtDur(st.end-st.start), o.grantedWords(st))
		if len(st.grantLat) > 0 {
			fmt.Fprintf(&b, ", p50 %s p99 %s", fmtDur(percentile(st.grantLat, 0.5)), fmtDur(percentile(st.grantLat, 0.99)))
		}
		fmt.Fprintf(&b, "; %s failed", num(st.failed))
		if st.failed > 0 {
			fmt.Fprintf(&b, " in p50 %s p99 %s max %s (TTL %v)", fmtDur(percentile(st.failLat, 0.5)), fmtDur(percentile(st.failLat, 0.99)), fmtDur(slices.Max(st.failLat)), o.cfg.ttl)
		}
		if st.busy > 0 {
			fmt.Fprintf(&b, "; %s not acquired", num(st.busy))
		}
		if st.note != "" {
			b.WriteString("; " + st.note)
		}
		switch {
		case !reached:
			b.WriteString("; did not end: " + o.failedAt)
		case want != "" && st.granted[want] == 0:
			fmt.Fprintf(&b, "; %s granted nothing", want)
		}
		r.Summary = b.String()
		r.add("reached", reached)
		r.add("start_s", st.start.Seconds())
		r.add("seconds", (st.end - st.start).Seconds())
		r.add("acquisitions", st.granted[primaryLabel]+st.granted[o.secLabel])
		r.add("by_redlock", st.granted[primaryLabel])
		r.add("by_secondary", st.granted[o.secLabel])
		r.add("secondary", o.secLabel)
		r.add("not_acquired", st.busy)
		r.add("failed", st.failed)
		r.add("acquire_p50_ms", ms(percentile(st.grantLat, 0.5)))
		r.add("acquire_p99_ms", ms(percentile(st.grantLat, 0.99)))
		r.add("fail_p50_ms", ms(percentile(st.failLat, 0.5)))
		r.add("fail_p99_ms", ms(percentile(st.failLat, 0.99)))
		var failMax time.Duration
		if len(st.failLat) > 0 {
			failMax = slices.Max(st.failLat)
		}
		r.add("fail_max_ms", ms(failMax))
		r.add("ttl_ms", o.cfg.ttl.Milliseconds())
		r.add("release_failed", st.releaseFailed)
		if st.firstErr != "" {
			r.add("first_error", st.firstErr)
		}
		rs = append(rs, r)
	}

	tokens := result{Variant: "tokens", OK: o.tokenViolations == 0 && o.sections > 0}
	by := fmt.Sprintf("%s %s and %s %s", primaryLabel, num(o.sectionsBy[primaryLabel]), o.secLabel, num(o.sectionsBy[o.secLabel]))
	switch {
	case o.tokenViolations > 0:
		tokens.Summary = fmt.Sprintf("%s of %s critical sections began with a token not above the key's last: %s", num(o.tokenViolations), num(o.sections), o.firstViolation)
	case o.sections == 0:
		tokens.Summary = "no critical section ran"
	default:
		tokens.Summary = fmt.Sprintf("%s critical sections on %d keys, tokens strictly increasing in the order they began, across both stores (%s)", num(o.sections), outageKeys, by)
	}
	if o.lateStarts > 0 {
		tokens.Summary += fmt.Sprintf("; %s leases ended before their critical section began", num(o.lateStarts))
	}
	tokens.add("critical_sections", o.sections)
	tokens.add("by_redlock", o.sectionsBy[primaryLabel])
	tokens.add("by_secondary", o.sectionsBy[o.secLabel])
	tokens.add("secondary", o.secLabel)
	tokens.add("not_increasing", o.tokenViolations)
	tokens.add("late_starts", o.lateStarts)
	if o.firstViolation != "" {
		tokens.add("first_violation", o.firstViolation)
	}

	fenced := result{Variant: "fence", OK: o.currentRefused == 0 && o.writeErrors == 0 && o.accepted > 0}
	switch {
	case o.currentRefused > 0:
		fenced.Summary = fmt.Sprintf("the register refused %s writes of current holders: two holders overlapped; first: %s", num(o.currentRefused), o.firstRefusal)
	case o.writeErrors > 0:
		fenced.Summary = fmt.Sprintf("%s writes to the register failed: %s", num(o.writeErrors), o.firstWriteErr)
	case o.accepted == 0:
		fenced.Summary = "no write reached the register"
	default:
		fenced.Summary = fmt.Sprintf("no two holders overlapped: the register accepted %s writes and refused none of a current holder", num(o.accepted))
	}
	fenced.Summary += fmt.Sprintf("; %s stale writes refused (leases that had ended)", num(o.staleRefused))
	fenced.add("writes_accepted", o.accepted)
	fenced.add("current_refused", o.currentRefused)
	fenced.add("stale_refused", o.staleRefused)
	fenced.add("write_errors", o.writeErrors)
	if o.firstRefusal != "" {
		fenced.add("first_refusal", o.firstRefusal)
	}
	return append(rs, tokens, fenced)
}

// percentile is the nearest-rank q-quantile of ds, 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// fmtDur rounds d for reading: 1.23ms, 412µs, 2.041s.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

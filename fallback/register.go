package fallback

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// The register is the state a pair keeps in its secondary, so that every
// process of the pair — a fresh one too — knows which store serves. It is
// a run of switch locks, each taken once with the secondary's own Acquire
// (the one way to change it, and only one process can take a lock) and
// never renewed nor released, on keys prefix + "1", prefix + "2", ...
// (registerPrefix): the held lock with the highest number is the pair's
// last switch. A process reads them all with the secondary's List, in
// one round trip; the secondary's clock measures how long each has
// left, the same for every process.
//
// A switch lock lasts switchTTL, the same for all, so that locks expire
// in the order they were taken: when the last one has gone, so has every
// earlier one, and with none held the primary serves. The owner id says
// the switch's direction, an id drawn for it and the grace of the process
// that took it (failoverOwner), which the readers use:
//
//   - last switch a failover, taken less than its grace ago: the
//     secondary's grace runs;
//   - a failover with more than its grace left: the secondary serves;
//   - a failover with at most its grace left (it lapses after switchTTL):
//     nothing is granted until it has expired, then the primary serves;
//   - a failback, taken less than its grace ago: the primary's grace runs;
//   - an older failback, or no switch lock held: the primary serves.
//
// A process switches the pair by taking the lock numbered one above the
// last it read: if another process took that one first, it reads again.
const ownerPrefix = "turnstile-fallback"

// switchTTL is how long a switch lock lasts: an outage longer than it
// sees the pair switch back (after a grace) and over again (after
// another).
const switchTTL = 72 * time.Hour

// maxSwitches is how many held switch locks a read takes in: more means
// the pair switched that often within switchTTL, and the read fails
// rather than find the last switch wrong.
const maxSwitches = 256

// lookTimeout bounds one read or write of the register: beyond it the
// register counts as unreachable (registerDown).
const lookTimeout = time.Second

// registerPrefix is the prefix of the switch locks' keys for the pair
// named pair ("" for none).
func registerPrefix(pair string) string {
	if pair == "" {
		return "turnstile:fallback/"
	}
	return "turnstile:fallback:" + pair + "/"
}

// Directions of a switch, as owner ids say them.
const (
	dirFailover = "failover"
	dirFailback = "failback"
)

// switchOwner is the owner id of a switch lock.
func switchOwner(dir string, grace time.Duration) string {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return fmt.Sprintf("%s %s %s grace=%dms", ownerPrefix, dir, hex.EncodeToString(id[:]), grace.Milliseconds())
}

// errForeign is why the register cannot be read: a lock under its prefix
// is not a switch lock of a fallback pair.
var errForeign = errors.New("a lock under the prefix is not a fallback pair's switch")

// parseSwitch reads the number of a switch lock from its key (after
// prefix), and the direction and grace from its owner id.
func parseSwitch(prefix, key, owner string) (n uint64, dir string, grace time.Duration, err error) {
	num, ok := strings.CutPrefix(key, prefix)
	if !ok || num == "" || len(num) > 19 || num[0] == '0' || strings.Trim(num, "0123456789") != "" {
		return 0, "", 0, errForeign
	}
	if n, err = strconv.ParseUint(num, 10, 64); err != nil {
		return 0, "", 0, errForeign
	}
	f := strings.Fields(owner)
	if len(f) != 4 || f[0] != ownerPrefix || (f[1] != dirFailover && f[1] != dirFailback) || len(f[2]) != 16 {
		return 0, "", 0, errForeign
	}
	if _, err := hex.DecodeString(f[2]); err != nil {
		return 0, "", 0, errForeign
	}
	v, ok := strings.CutPrefix(f[3], "grace=")
	if !ok {
		return 0, "", 0, errForeign
	}
	v, ok = strings.CutSuffix(v, "ms")
	if !ok {
		return 0, "", 0, errForeign
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 1 || time.Duration(ms)*time.Millisecond > 24*time.Hour {
		return 0, "", 0, errForeign
	}
	return n, f[1], time.Duration(ms) * time.Millisecond, nil
}

// regState is one reading of the register: its last switch.
type regState struct {
	phase phase
	gen   uint64        // the last switch lock's number; 0: none held
	grace time.Duration // the grace of the process that took it
	left  time.Duration // how long the phase's grace has left when read
}

// readRegister finds the last switch among the held locks under prefix
// and what it makes of the pair.
func readRegister(prefix string, states []driver.LockState) (regState, error) {
	var last regState
	var dir string
	var ttl time.Duration
	for _, st := range states {
		if !st.Held || len(st.Holders) == 0 {
			continue
		}
		n, d, grace, err := parseSwitch(prefix, st.Key, st.Holders[0].Owner)
		if err != nil {
			return regState{}, fmt.Errorf("%q: %w", st.Key, err)
		}
		if st.Holders[0].TTL < 0 {
			return regState{}, fmt.Errorf("%q: the secondary does not say how long its lock lasts", st.Key)
		}
		if n > last.gen {
			last, dir, ttl = regState{gen: n, grace: grace}, d, st.Holders[0].TTL
		}
	}
	if last.gen == 0 {
		return regState{phase: phasePrimary}, nil
	}
	age := switchTTL - ttl
	switch {
	case dir == dirFailback && age < last.grace:
		last.phase, last.left = phaseToPrimary, last.grace-age
	case dir == dirFailback:
		last.phase = phasePrimary
	case age < last.grace:
		last.phase, last.left = phaseToSecondary, last.grace-age
	case ttl <= last.grace:
		last.phase, last.left = phaseToPrimary, ttl
	default:
		last.phase = phaseSecondary
	}
	return last, nil
}

// registerInspector returns the secondary's Inspector, which reads the
// register; false if it has none.
func (b *Backend) registerInspector() (driver.Inspector, bool) {
	in, ok := b.reg.(driver.Inspector)
	return in, ok
}

// look reads the register and sets the phase from it. Only one look runs
// at a time; a call that finds one under way waits for it. It returns an
// error only when ctx ends: a register that cannot be read is logged and
// left alone for the open timeout (registerDown).
func (b *Backend) look(ctx context.Context) error {
	p := b.pair
	p.mu.Lock()
	if w := p.looking; w != nil {
		p.mu.Unlock()
		select {
		case <-w:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan struct{})
	p.looking = done
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.looking = nil
		p.mu.Unlock()
		close(done)
	}()

	in, ok := b.registerInspector()
	if !ok {
		b.registerOff()
		return nil
	}
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, lookTimeout)
	states, more, err := in.List(lctx, b.regPrefix, maxSwitches)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.registerDown("read", err)
		return nil
	}
	if more {
		b.registerDown("read", fmt.Errorf("more than %d switch locks are held", maxSwitches))
		return nil
	}
	r, err := readRegister(b.regPrefix, states)
	if err != nil {
		b.registerDown("read", err)
		return nil
	}
	b.follow(r, start, time.Now())
	return nil
}

// follow sets the phase to what the register said in a look that started
// at start and ended at end.
func (b *Backend) follow(r regState, start, end time.Time) {
	p := b.pair
	p.mu.Lock()
	if start.Before(p.looked) {
		p.mu.Unlock()
		return // a later look has been applied
	}
	p.regDown = time.Time{}
	if r.gen != 0 && r.grace != b.cfg.grace && !p.warnedGrace {
		p.warnedGrace = true
		b.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "turnstile fallback: the pair's processes use different graces; every process must use the same one",
			slog.Duration("grace", b.cfg.grace), slog.Duration("failover_grace", r.grace))
	}
	from, changed := p.moveLocked(r.phase, r.gen)
	p.looked, p.failGrace, p.until = start, r.grace, time.Time{}
	if r.phase.switching() {
		p.until = end.Add(r.left)
	}
	p.mu.Unlock()
	if changed {
		b.phaseChanged(from, r.phase, "the pair's state in the secondary")
	}
}

// registerDown makes the process keep to the phase it knows, without
// looking, for the open timeout, after the register could not be read or
// written.
func (b *Backend) registerDown(what string, err error) {
	p := b.pair
	p.mu.Lock()
	was := time.Now().Before(p.regDown)
	p.regDown = time.Now().Add(b.cfg.openTimeout)
	p.mu.Unlock()
	if !was {
		b.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "turnstile fallback: cannot "+what+" the pair's state in the secondary; this process keeps to the store it knows, and does not switch, for a while",
			slog.String("prefix", b.regPrefix), slog.String("secondary", b.names[secondary]), slog.Duration("for", b.cfg.openTimeout), slog.String("error", err.Error()))
	}
}

// registerOff makes the process switch on its own breaker for good: its
// secondary cannot keep the register.
func (b *Backend) registerOff() {
	p := b.pair
	p.mu.Lock()
	was := p.regOff
	p.regOff = true
	p.mu.Unlock()
	if !was {
		b.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "turnstile fallback: the secondary cannot keep the pair's state (no driver.Inspector); each process switches on its own breaker",
			slog.String("secondary", b.names[secondary]))
	}
}

// failover moves the pair to the secondary after this process's breaker
// opened, and reports whether the pair is switching or has switched:
// through the register, or alone when the secondary cannot keep one. A
// process that cannot write the register does not switch alone: the
// others, which read it, would go on using the primary.
func (b *Backend) failover(ctx context.Context) bool {
	s := b.pair.snapshot()
	switch {
	case s.phase != phasePrimary:
		return true
	case s.own:
		b.switchAlone(phasePrimary, phaseToSecondary)
		return true
	case s.alone:
		return false
	}
	return b.propose(ctx, s.gen, dirFailover)
}

// failback moves the pair back to the primary after a probe of it
// succeeded, as failover does.
func (b *Backend) failback(ctx context.Context) {
	s := b.pair.snapshot()
	switch {
	case s.phase.target() != secondary:
	case s.own:
		b.switchAlone(s.phase, phaseToPrimary)
	case !s.alone:
		b.propose(ctx, s.gen, dirFailback)
	}
}

// propose takes the switch lock after last, the last one this process
// read, for a switch in direction dir, and follows what the register then
// says. It reports false when the register could not be written.
func (b *Backend) propose(ctx context.Context, last uint64, dir string) bool {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, lookTimeout)
	_, ok, err := b.reg.Acquire(wctx, b.regPrefix+strconv.FormatUint(last+1, 10), switchOwner(dir, b.cfg.grace), switchTTL)
	cancel()
	switch {
	case err == nil && ok:
		to := phaseToSecondary
		if dir == dirFailback {
			to = phaseToPrimary
		}
		b.follow(regState{phase: to, gen: last + 1, grace: b.cfg.grace, left: b.cfg.grace}, start, time.Now())
		return true
	case err == nil:
		// Another process switched first: read what it did.
		_ = b.look(ctx)
		return true
	case ctx.Err() != nil:
		return true // the caller gave up: nothing is known of the write
	}
	b.registerDown("write", err)
	return false
}

// switchAlone moves the pair from phase from to the switching phase to,
// on this process's own breaker, when the secondary cannot keep the
// register: its grace runs from now.
func (b *Backend) switchAlone(from, to phase) {
	p := b.pair
	p.mu.Lock()
	if p.phase != from {
		p.mu.Unlock()
		return
	}
	p.moveLocked(to, p.gen)
	p.until = time.Now().Add(b.cfg.grace)
	p.looked = time.Time{}
	p.mu.Unlock()
	b.phaseChanged(from, to, "this process's breaker")
}

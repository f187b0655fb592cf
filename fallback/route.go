package fallback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/turnstilelock/turnstile/driver"
)

// probeTimeout bounds a probe of the primary: a primary that does not
// answer must not hold an acquisition that the secondary can serve.
const probeTimeout = time.Second

// errStale is why a renewal was not tried: the pair's state in the
// secondary was last read too long ago to renew on, and reading it again
// took too long. The Client tries again while the lease lasts.
var errStale = errors.New("fallback: the pair's state in the secondary could not be read in time to renew on it")

// decision is where one call goes, as route decides it.
type decision struct {
	store store
	epoch uint64
	gated bool // a grace runs: nothing is granted
	stale bool // the last look at the register is too old to grant or renew on
	probe bool // the call probes the primary first
}

// route decides where a call with lease TTL ttl goes. It reads the
// register when this process's last look is too old for ttl or a grace
// has run, moves the pair to the secondary when this process's breaker
// has opened while the primary serves, and, for an acquisition
// (probing), says whether it probes the primary first. Its error is the
// caller's context ending.
func (b *Backend) route(ctx context.Context, ttl time.Duration, probing bool) (decision, error) {
	p := b.pair
	s := p.snapshot()
	if !s.alone && b.mustLook(s, ttl, time.Now()) {
		if err := b.look(ctx); err != nil {
			return decision{}, err
		}
		s = p.snapshot()
	}
	if s.alone && s.phase.switching() && !time.Now().Before(s.until) {
		b.settleAlone(s.phase)
		s = p.snapshot()
	}
	if s.phase == phasePrimary && p.breaker().State() != gobreaker.StateClosed {
		b.failover(ctx)
		s = p.snapshot()
	}
	now := time.Now()
	d := decision{store: s.phase.target(), epoch: s.epoch, gated: s.phase.switching()}
	d.stale = !s.alone && (s.looked.IsZero() || now.Sub(s.looked) >= b.trust(s, ttl))
	if probing && d.store == secondary && p.breaker().State() != gobreaker.StateOpen {
		p.mu.Lock()
		if !now.Before(p.nextProbe) {
			p.nextProbe = now.Add(b.cfg.openTimeout)
			d.probe = true
		}
		p.mu.Unlock()
	}
	return d, nil
}

// mustLook reports whether a call with lease TTL ttl must read the
// register before it goes anywhere.
func (b *Backend) mustLook(s snapshot, ttl time.Duration, now time.Time) bool {
	if s.looked.IsZero() || now.Sub(s.looked) >= b.trust(s, ttl) {
		return true
	}
	return s.phase.switching() && !now.Before(s.until)
}

// trust is how long after a look a grant or renewal of ttl may start on
// it: trust(grace, ttl) for the shorter of this process's grace and the
// failover's (they are the same when the pair is set up as it must be).
func (b *Backend) trust(s snapshot, ttl time.Duration) time.Duration {
	g := b.cfg.grace
	if s.failGrace > 0 && s.failGrace < g {
		g = s.failGrace
	}
	return trust(g, ttl)
}

// settleAlone ends the switching phase from, whose grace has run, without
// looking at the register (it cannot be read, or there is none).
func (b *Backend) settleAlone(from phase) {
	p := b.pair
	p.mu.Lock()
	if p.phase != from || time.Now().Before(p.until) {
		p.mu.Unlock()
		return
	}
	to := from.settled()
	p.moveLocked(to, p.gen)
	p.mu.Unlock()
	b.phaseChanged(from, to, "the end of the grace")
}

// phaseChanged logs a change of the pair's phase. On the way back to the
// primary it also closes this process's breaker if it is still open: the
// failures it counted are older than the failback.
func (b *Backend) phaseChanged(from, to phase, why string) {
	level := slog.LevelInfo
	if to == phaseToSecondary {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("from", from.String()), slog.String("to", to.String()),
		slog.String("serving", b.names[to.target()]), slog.String("because_of", why),
	}
	if to.switching() {
		attrs = append(attrs, slog.Duration("grace", b.cfg.grace))
	}
	b.cfg.logger.LogAttrs(context.Background(), level, "turnstile fallback: the pair's state changed", attrs...)
	if to == phasePrimary {
		b.resetBreaker()
	}
}

// resetBreaker replaces an open or half-open breaker with a closed one.
func (b *Backend) resetBreaker() {
	old := b.pair.breaker()
	st := old.State()
	if st == gobreaker.StateClosed {
		return
	}
	if b.pair.cb.CompareAndSwap(old, newBreaker(b)) {
		b.stateChanged(fromBreaker(st), StateClosed)
	}
}

// probe tests the primary with the caller's own call, whose result is
// given up whatever it is (it takes and at once releases the key there):
// the secondary serves until the pair has switched back. A probe that
// succeeds switches the pair back to the primary.
func (b *Backend) probe(ctx context.Context, key, owner string, ttl time.Duration) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := b.do(ctx, primary, func(p driver.Backend) error {
		_, ok, err := p.Acquire(pctx, key, owner, ttl)
		if ok {
			_, err = p.Release(pctx, key, owner)
		}
		return err
	})
	if err == nil {
		b.failback(ctx)
	}
}

// do runs f on store s. Calls to the primary pass through the breaker,
// which counts store errors (not "not acquired" or "not held" answers,
// not errors caused by the caller's context ending, and not refusals
// matching turnstile.ErrInvalidOption or turnstile.ErrUnsupported) as
// failures.
func (b *Backend) do(ctx context.Context, s store, f func(driver.Backend) error) error {
	if s == secondary {
		if err := f(b.stores[secondary]); err != nil {
			return fmt.Errorf("fallback: secondary %s: %w", b.names[secondary], err)
		}
		return nil
	}
	_, err := b.pair.breaker().Execute(func() (bool, error) {
		err := f(b.stores[primary])
		if err != nil && (ctx.Err() != nil || notAFailure(err)) {
			// The caller gave up, or asked what the store does not do:
			// neither says anything about the store.
			return false, &callerDoneError{err}
		}
		b.pair.unreached.Store(errors.Is(err, errNotConnected))
		if err == nil {
			b.pair.answered.Store(true)
		}
		return false, err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		return fmt.Errorf("%w (%s): %w", ErrPrimaryDown, b.names[primary], err)
	}
	if d, ok := errors.AsType[*callerDoneError](err); ok {
		err = d.err
	}
	return fmt.Errorf("fallback: primary %s: %w", b.names[primary], err)
}

package locktest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// The randomized checker's store (RunRandom): every Client of a run
// talks to the store under test through a faulty backend, which injects
// faults at the calls the Client makes and tells the oracle what the
// store actually did. Which capabilities it passes on is in
// capabilities.go.

// op names a store call, for the fault plan.
type op uint8

const (
	opAcquire op = iota
	opExtend     // Extend from a holder's own call (its context carries a chooser)
	opRenew      // Extend and ExtendMany from the watchdog
	opRelease    // Release, ReleaseNotice
	opInspect
	opForceRelease
	nOps
)

// fault is what happens to one store call.
type fault uint8

const (
	faultNone fault = iota
	// faultLost: the store acts, then the reply is lost (an error).
	faultLost
	// faultLate: the request reaches the store late (it waits first).
	faultLate
	// faultSlow: the store acts at once, the reply comes late.
	faultSlow
	// faultFail: the request never reaches the store (an error).
	faultFail
	// faultStale (Inspect only): the answer is one the store gave at an
	// earlier moment of the key, delayed.
	faultStale
)

// rates are the chances of each fault on one kind of call, and how long
// a late request or a slow reply takes at most.
type rates struct {
	lost, late, slow, fail, stale float64
	delay                         time.Duration
}

// errInjected is the error of an injected fault: a connection that broke.
var errInjected = errors.New("locktest: injected fault: connection reset")

// chooser makes the random choices of one goroutine: a seeded PRNG, or
// a fuzzer's input bytes.
type chooser interface {
	// intn returns a number in [0, n), n > 0.
	intn(n int) int
}

// float returns a number in [0, 1).
func float(c chooser) float64 { return float64(c.intn(1<<20)) / (1 << 20) }

// chance reports true with probability p.
func chance(c chooser, p float64) bool { return p > 0 && float(c) < p }

// between returns a duration in [lo, hi].
func between(c chooser, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(c.intn(int(hi-lo)+1))
}

type rngChooser struct{ r *rand.Rand }

func newRNG(seed uint64) *rngChooser {
	return &rngChooser{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (c *rngChooser) intn(n int) int { return c.r.IntN(n) }

// lockedChooser is a chooser several goroutines share.
type lockedChooser struct {
	mu sync.Mutex
	c  chooser
}

func (l *lockedChooser) intn(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.intn(n)
}

type chooserKey struct{}

// withChooser returns ctx carrying c: the faults of store calls made
// with ctx are drawn from c, so that a worker's seed fixes the faults its
// own calls meet. Calls the Client makes on its own (renewals, cleanups)
// draw from the run's chooser.
func withChooser(ctx context.Context, c chooser) context.Context {
	return context.WithValue(ctx, chooserKey{}, c)
}

// faulty is the backend one Client of a run uses.
type faulty struct {
	base driver.Backend
	w    *world
}

func (f *faulty) draw(ctx context.Context, o op) (fault, time.Duration) {
	r := f.w.plan[o]
	c, ok := ctx.Value(chooserKey{}).(chooser)
	if !ok {
		c = f.w.background
	}
	if o == opExtend && !ok {
		r = f.w.plan[opRenew]
	}
	x := float(c)
	d := between(c, 0, r.delay)
	for _, k := range []struct {
		p float64
		f fault
	}{{r.lost, faultLost}, {r.late, faultLate}, {r.slow, faultSlow}, {r.fail, faultFail}, {r.stale, faultStale}} {
		if x < k.p {
			return k.f, d
		}
		x -= k.p
	}
	return faultNone, 0
}

// sleep waits d or until ctx is done, and reports whether ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() != nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}

// do runs act, one store call of kind o, with the fault drawn for it.
func (f *faulty) do(ctx context.Context, o op, act func(context.Context) error) error {
	fl, d := f.draw(ctx, o)
	return doWith(ctx, fl, d, act)
}

// doWith runs act with fault fl, whose delay is d.
func doWith(ctx context.Context, fl fault, d time.Duration, act func(context.Context) error) error {
	switch fl {
	case faultFail:
		return errInjected
	case faultLate:
		if sleep(ctx, d) {
			return ctx.Err() // given up before it was sent
		}
	}
	if err := act(ctx); err != nil {
		return err
	}
	switch fl {
	case faultLost:
		return errInjected
	case faultSlow:
		if sleep(ctx, d) {
			return ctx.Err()
		}
	}
	return nil
}

func (f *faulty) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (tok uint64, ok bool, err error) {
	err = f.do(ctx, opAcquire, func(ctx context.Context) error {
		var err error
		tok, ok, err = f.base.Acquire(ctx, key, owner, ttl)
		if ok && err == nil {
			f.w.granted(key, owner)
		}
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return tok, ok, nil
}

func (f *faulty) Extend(ctx context.Context, key, owner string, ttl time.Duration) (ok bool, err error) {
	err = f.do(ctx, opExtend, func(ctx context.Context) error {
		var err error
		ok, err = f.base.Extend(ctx, key, owner, ttl)
		return err
	})
	return ok && err == nil, err
}

func (f *faulty) Release(ctx context.Context, key, owner string) (ok bool, err error) {
	err = f.do(ctx, opRelease, func(ctx context.Context) error {
		var err error
		ok, err = f.base.Release(ctx, key, owner)
		return err
	})
	return ok && err == nil, err
}

// release runs one of the release capabilities with the faults of a
// release.
func (f *faulty) release(ctx context.Context, act func(context.Context) (bool, error)) (ok bool, err error) {
	err = f.do(ctx, opRelease, func(ctx context.Context) error {
		var err error
		ok, err = act(ctx)
		return err
	})
	return ok && err == nil, err
}

// inspect is Inspect with the faults of an Inspect: a stale answer is
// one the store gave earlier for the key (or, before there is one, a
// free key: the answer of a Redlock member that missed the grant).
func (f *faulty) inspect(ctx context.Context, key string) (st driver.LockState, err error) {
	in := f.base.(driver.Inspector)
	fl, d := f.draw(ctx, opInspect)
	if fl != faultStale {
		err = doWith(ctx, fl, d, func(ctx context.Context) error {
			var err error
			st, err = in.Inspect(ctx, key)
			return err
		})
		if err == nil {
			f.w.answered(key, st)
		}
		return st, err
	}
	return f.w.staleAnswer(key), nil
}

// forceRelease removes key's lock in the store and tells the oracle at
// once, under its lock, whose grant it removed: a lease granted after
// the removal must not meet the removed one as a second holder before
// the oracle knows.
func (f *faulty) forceRelease(ctx context.Context, key string) (st driver.LockState, err error) {
	fr := f.base.(driver.ForceReleaser)
	err = f.do(ctx, opForceRelease, func(ctx context.Context) error {
		var err error
		st, err = f.w.o.remove(key, func() (driver.LockState, error) { return fr.ForceRelease(ctx, key) }, removedBy(ctx))
		return err
	})
	return st, err
}

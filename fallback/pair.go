package fallback

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// phase is where a pair stands: which store serves acquisitions, or which
// one it is switching to while a grace runs and nothing is granted.
type phase int

const (
	phasePrimary     phase = iota // the primary serves
	phaseToSecondary              // switching to the secondary: its grace runs
	phaseSecondary                // the secondary serves
	phaseToPrimary                // switching back to the primary: its grace runs
)

func (p phase) String() string {
	switch p {
	case phasePrimary:
		return "primary"
	case phaseToSecondary:
		return "switching to the secondary"
	case phaseSecondary:
		return "secondary"
	}
	return "switching to the primary"
}

// target is the store that serves acquisitions in p, or will once p's
// grace has run.
func (p phase) target() store {
	if p == phasePrimary || p == phaseToPrimary {
		return primary
	}
	return secondary
}

// switching reports whether p is a grace, in which nothing is granted.
func (p phase) switching() bool { return p == phaseToSecondary || p == phaseToPrimary }

// settled is the phase p ends in once its grace has run.
func (p phase) settled() phase {
	switch p {
	case phaseToSecondary:
		return phaseSecondary
	case phaseToPrimary:
		return phasePrimary
	}
	return p
}

// pairState is what a Backend, and the views of the lock kinds made from
// it, know of the pair: the phase, as the last look at the state the pair
// keeps in the secondary (the register, see register.go) said it, or, when
// the secondary cannot keep one, as this process's own breaker moved it;
// and the breaker itself. Every field but the atomics is guarded by mu.
type pairState struct {
	mu sync.Mutex
	// phase is where the pair stands as far as this process knows.
	phase phase
	// epoch is incremented whenever the target store changes or the
	// register shows another last switch than before: a lease of an
	// earlier epoch is never renewed.
	epoch uint64
	// until is when the grace of a switching phase ends: the next call
	// looks at the register then (or, deciding alone, settles the phase).
	until time.Time
	// looked is when the look that set the phase started; zero when this
	// process set it alone. Grants and renewals on the phase start within
	// trust(grace, ttl) of it.
	looked time.Time
	// gen is the number of the register's last switch, as last read (0:
	// none held), and failGrace the grace of the process that took it.
	gen       uint64
	failGrace time.Duration
	// regDown: the register could not be read or written; until then
	// the process keeps to the phase it knows without looking.
	regDown time.Time
	// regOff: the secondary cannot keep the register (it has no
	// driver.Inspector); the process switches on its own breaker.
	regOff bool
	// nextProbe is the earliest time an acquisition probes the primary
	// while the secondary serves (or is switched to).
	nextProbe time.Time
	// looking is closed when the look under way ends; nil if none is.
	looking chan struct{}
	// warnedGrace: a failover with another grace than this process's
	// has been logged.
	warnedGrace bool

	cb atomic.Pointer[gobreaker.CircuitBreaker[bool]]
	// answered: the primary answered a call of this process (or opened):
	// until it has, the first failure to reach it opens the breaker.
	answered atomic.Bool
	// unreached: the primary's last failure was that it could not be
	// reached at all (a member opened from a URL that has not connected).
	unreached atomic.Bool
}

// snapshot is a copy of what a call needs of a pairState.
type snapshot struct {
	phase     phase
	epoch     uint64
	until     time.Time
	looked    time.Time
	gen       uint64
	failGrace time.Duration
	// alone: the register is not read now; the process keeps to the
	// phase it knows (and ends a grace it knows of) without looking.
	alone bool
	// own: the secondary cannot keep the register; the process also
	// switches on its own breaker, with its own grace.
	own bool
}

func (p *pairState) snapshotLocked(now time.Time) snapshot {
	return snapshot{
		phase: p.phase, epoch: p.epoch, until: p.until, looked: p.looked,
		gen: p.gen, failGrace: p.failGrace,
		alone: p.regOff || now.Before(p.regDown),
		own:   p.regOff,
	}
}

func (p *pairState) snapshot() snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotLocked(time.Now())
}

// moveLocked sets the phase to to, in the register's switch gen, and
// says whether the phase changed. The epoch moves on when the target
// store or the switch changes.
func (p *pairState) moveLocked(to phase, gen uint64) (from phase, changed bool) {
	from = p.phase
	if to.target() != from.target() || gen != p.gen {
		p.epoch++
	}
	p.phase, p.gen = to, gen
	return from, from != to
}

func (p *pairState) breaker() *gobreaker.CircuitBreaker[bool] { return p.cb.Load() }

// epochNow returns the current epoch.
func (p *pairState) epochNow() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

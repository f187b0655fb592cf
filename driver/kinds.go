package driver

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidOption is turnstile.ErrInvalidOption, here so that backends
// that package turnstile itself imports (memory, for mem:// URLs) can
// return errors matching it.
var ErrInvalidOption = errors.New("turnstile: invalid option")

// The lock kinds beside the plain lock. A backend offers each kind it can
// give safely by implementing that kind's interface; each returns a view
// of the backend that is itself a Backend, to pass to turnstile.New. A
// backend that implements an interface but cannot give the kind in its
// present configuration (a Redlock cannot bound a semaphore's holders, a
// fallback pair needs the kind on both stores) returns an error matching
// turnstile.ErrUnsupported that says why. turnstile.Reentrant,
// turnstile.Semaphore, turnstile.ReadWrite and turnstile.Fair are the
// callers' one way to these views, for any backend: they gather the
// kind's settings from their options into a KindConfig, check it
// (KindConfig.Check) and hand it to the backend's view, so that every
// kind has one signature and every setting one check, whatever the
// store.

// Limits and defaults of the kinds' settings, the same on every store.
const (
	// MaxPermits is the most permits a semaphore hands out per key.
	MaxPermits = 10000
	// DefaultWriterClaim is how long a waiting writer of a read-write
	// lock keeps new readers out after its last attempt, unless
	// KindConfig.WriterClaim says otherwise.
	DefaultWriterClaim = 2 * time.Second
	// MinWriterClaim and MaxWriterClaim bound KindConfig.WriterClaim.
	MinWriterClaim = 10 * time.Millisecond
	MaxWriterClaim = time.Hour
	// MinWaiterTimeout and MaxWaiterTimeout bound
	// KindConfig.WaiterTimeout.
	MinWaiterTimeout = 100 * time.Millisecond
	MaxWaiterTimeout = time.Hour
	// MinPollInterval and MaxPollInterval bound KindConfig.PollInterval.
	MinPollInterval = time.Millisecond
	MaxPollInterval = time.Minute
)

// KindConfig is what a view of a lock kind is made with: the settings a
// caller gave turnstile's function of the kind, checked. A zero duration
// is the default. A setting that tunes a mechanism a store does not have
// is taken without effect there (a store that queues writers in order
// needs no writer claim), so that one call serves every store. A backend
// made of other backends (Redlock, a fallback pair) hands its settings
// on to their views unchanged.
type KindConfig struct {
	// Permits is a semaphore's number of permits per key, in
	// [1, MaxPermits]; zero for the other kinds. The number is stored
	// with the semaphore's holders: while any permit of a key is held,
	// an acquisition through a view made with another number is refused
	// with an error matching turnstile.ErrInvalidOption that names both
	// numbers, so that two processes never disagree about it; once no
	// permit is held, the next acquisition's number holds.
	Permits int
	// WriterClaim is how long a waiting writer of a read-write lock
	// keeps new readers out after its last attempt, on stores whose
	// writers claim the lock rather than queue for it: so a writer that
	// gave up or crashed blocks new readers for at most that long. It
	// must exceed the longest pause between a waiting writer's attempts
	// (the Client's default Backoff pauses at most 1 s) and lie in
	// [MinWriterClaim, MaxWriterClaim]; zero is DefaultWriterClaim.
	WriterClaim time.Duration
	// WaiterTimeout is how long a waiter of a fair lock keeps its place
	// without a heartbeat, on stores whose queue lives on heartbeats
	// (Redis): a crashed process's waiters age out after it. In
	// [MinWaiterTimeout, MaxWaiterTimeout]; zero is the store's default.
	WaiterTimeout time.Duration
	// PollInterval is how often the first waiters of a fair lock look at
	// the lock again when no release notice comes, on stores whose
	// waiters poll (Redis, memory). In [MinPollInterval,
	// MaxPollInterval]; zero is the store's default.
	PollInterval time.Duration
}

// Check reports the first setting of c that no store can work with, as
// an error matching ErrInvalidOption. A semaphore's permits are checked
// when they are given (non-zero); turnstile.Semaphore always gives them.
func (c KindConfig) Check() error {
	if c.Permits != 0 {
		if err := CheckPermits(c.Permits); err != nil {
			return err
		}
	}
	switch {
	case !within(c.WriterClaim, MinWriterClaim, MaxWriterClaim):
		return fmt.Errorf("%w: writer claim %v is outside [%v, %v]", ErrInvalidOption, c.WriterClaim, MinWriterClaim, MaxWriterClaim)
	case !within(c.WaiterTimeout, MinWaiterTimeout, MaxWaiterTimeout):
		return fmt.Errorf("%w: waiter timeout %v is outside [%v, %v]", ErrInvalidOption, c.WaiterTimeout, MinWaiterTimeout, MaxWaiterTimeout)
	case !within(c.PollInterval, MinPollInterval, MaxPollInterval):
		return fmt.Errorf("%w: poll interval %v is outside [%v, %v]", ErrInvalidOption, c.PollInterval, MinPollInterval, MaxPollInterval)
	}
	return nil
}

// CheckPermits refuses a semaphore's number of permits outside
// [1, MaxPermits] with an error matching ErrInvalidOption.
func CheckPermits(n int) error {
	if n < 1 || n > MaxPermits {
		return fmt.Errorf("%w: %d permits is outside [1, %d]", ErrInvalidOption, n, MaxPermits)
	}
	return nil
}

// within reports whether d is zero (the default) or lies in [lo, hi].
func within(d, lo, hi time.Duration) bool { return d == 0 || d >= lo && d <= hi }

// Claim returns c's writer claim, DefaultWriterClaim when none is set.
func (c KindConfig) Claim() time.Duration {
	if c.WriterClaim == 0 {
		return DefaultWriterClaim
	}
	return c.WriterClaim
}

// Reentranter is implemented by backends with a reentrant lock: an owner
// that holds a key may acquire it again, and holds it until it released
// it as often as it acquired it. The Client's owner must be fixed
// (turnstile.WithOwner) for re-entry across leases. The reentrant lock
// has no settings of its own yet: cfg is the zero KindConfig.
type Reentranter interface {
	ReentrantView(cfg KindConfig) (Backend, error)
}

// Semaphorer is implemented by backends with a semaphore: up to
// cfg.Permits owners hold a key at once, each lease one permit (see
// KindConfig.Permits for the stored number).
type Semaphorer interface {
	SemaphoreView(cfg KindConfig) (Backend, error)
}

// ReadWriter is implemented by backends with a read-write lock: any
// number of owners hold a key through read, or one through write, never
// both, and waiting writers are not starved by a stream of readers
// (cfg.WriterClaim, on stores whose writers claim the lock).
type ReadWriter interface {
	ReadWriteView(cfg KindConfig) (read, write Backend, err error)
}

// Fairer is implemented by backends with a first-come, first-served lock
// whose waiters queue in the store and learn their place
// (PositionFunc); cfg.WaiterTimeout and cfg.PollInterval tune the queue
// of stores that need them. A backend that is itself a Queuer is fair as
// it is and need not implement Fairer.
type Fairer interface {
	FairView(cfg KindConfig) (Backend, error)
}

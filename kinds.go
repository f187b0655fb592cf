package turnstile

import (
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds beside the plain lock have one way in each, for every
// store: these functions. Each returns the store's view of its kind, a
// backend for New, made with the kind's settings from its KindOptions,
// checked here once (driver.KindConfig.Check) whatever the store.

// The kinds, as errors name them.
const (
	kindReentrant = "reentrant lock"
	kindSemaphore = "semaphore"
	kindReadWrite = "read-write lock"
	kindFair      = "fair lock"
)

// A KindOption changes a setting of a lock kind's view; it belongs to one
// kind's function, and another kind's refuses it (ErrInvalidOption).
type KindOption func(*kindRequest) error

// kindRequest is a view being asked for: its kind and settings.
type kindRequest struct {
	kind string
	cfg  driver.KindConfig
}

// kindOption is a KindOption of kind: set changes the settings.
func kindOption(name, kind string, set func(*driver.KindConfig)) KindOption {
	return func(r *kindRequest) error {
		if r.kind != kind {
			return fmt.Errorf("%w: %s is a setting of the %s, not the %s", ErrInvalidOption, name, kind, r.kind)
		}
		set(&r.cfg)
		return nil
	}
}

// WithWriterClaim sets, for ReadWrite, how long a waiting writer keeps
// new readers out after its last attempt: a writer that gave up or
// crashed blocks new readers for at most that long. It must exceed the
// longest pause between a waiting writer's attempts (the Client's
// default Backoff pauses at most 1 s) and lie in [10 ms, 1 h]; default
// (and zero) driver.DefaultWriterClaim, 2 s. Stores that queue writers
// in order (etcd, ZooKeeper) need no claim and take it without effect.
func WithWriterClaim(d time.Duration) KindOption {
	return kindOption("WithWriterClaim", kindReadWrite, func(c *driver.KindConfig) { c.WriterClaim = d })
}

// WithWaiterTimeout sets, for Fair, how long a waiter keeps its place in
// a queue that lives on heartbeats (Redis: waiters beat every third of
// it) without one, so that a crashed process's waiters age out after
// it. In [100 ms, 1 h]; default (and zero) the store's own, 5 s on
// Redis. Where a waiter's place lives as long as its session or lease
// (etcd, ZooKeeper) or its process (memory), it has no effect.
func WithWaiterTimeout(d time.Duration) KindOption {
	return kindOption("WithWaiterTimeout", kindFair, func(c *driver.KindConfig) { c.WaiterTimeout = d })
}

// WithPollInterval sets, for Fair, how often the first waiters look at
// the lock again when no release notice comes (one was lost, or the
// holder's lock expired). In [1 ms, 1 min]; default (and zero) the
// store's own: 200 ms on Redis, 5 ms in memory. Waiters that watch the
// store (etcd, ZooKeeper) do not poll, and it has no effect there.
func WithPollInterval(d time.Duration) KindOption {
	return kindOption("WithPollInterval", kindFair, func(c *driver.KindConfig) { c.PollInterval = d })
}

// kindConfig gathers and checks the settings of a view of kind.
func kindConfig(kind string, cfg driver.KindConfig, opts []KindOption) (driver.KindConfig, error) {
	r := kindRequest{kind: kind, cfg: cfg}
	for _, o := range opts {
		if o == nil {
			return driver.KindConfig{}, fmt.Errorf("%w: nil option of the %s", ErrInvalidOption, kind)
		}
		if err := o(&r); err != nil {
			return driver.KindConfig{}, err
		}
	}
	return r.cfg, r.cfg.Check()
}

// Reentrant returns the reentrant view of b, for New: an owner that holds
// a key may acquire it again, and holds it until it has released it as
// often. A backend without one gives an error matching ErrUnsupported
// that names it. The reentrant lock has no options yet.
func Reentrant(b driver.Backend, opts ...KindOption) (driver.Backend, error) {
	cfg, err := kindConfig(kindReentrant, driver.KindConfig{}, opts)
	if err != nil {
		return nil, err
	}
	if r, ok := b.(driver.Reentranter); ok {
		return r.ReentrantView(cfg)
	}
	return nil, noKind(b, kindReentrant, "driver.Reentranter")
}

// Semaphore returns the view of b in which up to permits owners hold a
// key at once, each lease one permit, for New; permits must lie in
// [1, driver.MaxPermits]. The number is stored with the holders: while a
// key's permits are held with one number, an acquisition through a view
// with another is refused (ErrInvalidOption, naming both). A backend
// without semaphores gives an error matching ErrUnsupported that names
// it. The semaphore has no options yet.
func Semaphore(b driver.Backend, permits int, opts ...KindOption) (driver.Backend, error) {
	if err := driver.CheckPermits(permits); err != nil {
		return nil, err
	}
	cfg, err := kindConfig(kindSemaphore, driver.KindConfig{Permits: permits}, opts)
	if err != nil {
		return nil, err
	}
	if s, ok := b.(driver.Semaphorer); ok {
		return s.SemaphoreView(cfg)
	}
	return nil, noKind(b, kindSemaphore, "driver.Semaphorer")
}

// ReadWrite returns the two sides of b's read-write lock, for New: any
// number of owners hold a key through read, or one through write, and
// waiting writers are not starved by readers (WithWriterClaim). A
// backend without one gives an error matching ErrUnsupported that names
// it.
func ReadWrite(b driver.Backend, opts ...KindOption) (read, write driver.Backend, err error) {
	cfg, err := kindConfig(kindReadWrite, driver.KindConfig{}, opts)
	if err != nil {
		return nil, nil, err
	}
	if rw, ok := b.(driver.ReadWriter); ok {
		return rw.ReadWriteView(cfg)
	}
	return nil, nil, noKind(b, kindReadWrite, "driver.ReadWriter")
}

// Fair returns the first-come, first-served view of b, for New: waiters
// queue in the store and take the lock in their order, and
// WithQueuePosition tells each its place (WithWaiterTimeout and
// WithPollInterval tune the queue). A backend that queues waiters itself
// (etcd, ZooKeeper) is its own fair view. A backend with no queue gives
// an error matching ErrUnsupported that names it.
func Fair(b driver.Backend, opts ...KindOption) (driver.Backend, error) {
	cfg, err := kindConfig(kindFair, driver.KindConfig{}, opts)
	if err != nil {
		return nil, err
	}
	if f, ok := b.(driver.Fairer); ok {
		return f.FairView(cfg)
	}
	if _, ok := b.(driver.Queuer); ok {
		return b, nil
	}
	return nil, noKind(b, kindFair, "driver.Fairer or driver.Queuer")
}

func noKind(b driver.Backend, kind, iface string) error {
	if b == nil {
		return ErrNilBackend
	}
	return fmt.Errorf("%w: %s has no %s (%s)", ErrUnsupported, driver.Name(b), kind, iface)
}

package driver

import "errors"

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
// callers' way to these views, for any backend.

// Reentranter is implemented by backends with a reentrant lock: an owner
// that holds a key may acquire it again, and holds it until it released
// it as often as it acquired it. The Client's owner must be fixed
// (turnstile.WithOwner) for re-entry across leases.
type Reentranter interface {
	ReentrantView() (Backend, error)
}

// Semaphorer is implemented by backends with a semaphore: up to permits
// owners hold a key at once, each lease one permit. The number of
// permits is stored with the semaphore's holders: while any permit of a
// key is held, an acquisition through a view made with another number is
// refused with an error matching turnstile.ErrInvalidOption that names
// both numbers, so that two processes never disagree about it; once no
// permit is held, the next acquisition's number holds.
type Semaphorer interface {
	SemaphoreView(permits int) (Backend, error)
}

// ReadWriter is implemented by backends with a read-write lock: any
// number of owners hold a key through read, or one through write, never
// both, and waiting writers are not starved by a stream of readers.
type ReadWriter interface {
	ReadWriteView() (read, write Backend, err error)
}

// Fairer is implemented by backends with a first-come, first-served lock
// whose waiters queue in the store and learn their place
// (PositionFunc). A backend that is itself a Queuer is fair as it is and
// need not implement Fairer.
type Fairer interface {
	FairView() (Backend, error)
}

package turnstile

import (
	"fmt"

	"github.com/turnstilelock/turnstile/driver"
)

// Reentrant returns the reentrant view of b, for New: an owner that holds
// a key may acquire it again, and holds it until it has released it as
// often. A backend without one gives an error matching ErrUnsupported
// that names it.
func Reentrant(b driver.Backend) (driver.Backend, error) {
	if r, ok := b.(driver.Reentranter); ok {
		return r.ReentrantView()
	}
	return nil, noKind(b, "reentrant lock", "driver.Reentranter")
}

// Semaphore returns the view of b in which up to permits owners hold a
// key at once, each lease one permit, for New. The number is stored with
// the holders: while a key's permits are held with one number, an
// acquisition through a view with another is refused (ErrInvalidOption,
// naming both). A backend without semaphores gives an error matching
// ErrUnsupported that names it.
func Semaphore(b driver.Backend, permits int) (driver.Backend, error) {
	if s, ok := b.(driver.Semaphorer); ok {
		return s.SemaphoreView(permits)
	}
	return nil, noKind(b, "semaphore", "driver.Semaphorer")
}

// ReadWrite returns the two sides of b's read-write lock, for New: any
// number of owners hold a key through read, or one through write. A
// backend without one gives an error matching ErrUnsupported that names
// it.
func ReadWrite(b driver.Backend) (read, write driver.Backend, err error) {
	if rw, ok := b.(driver.ReadWriter); ok {
		return rw.ReadWriteView()
	}
	return nil, nil, noKind(b, "read-write lock", "driver.ReadWriter")
}

// Fair returns the first-come, first-served view of b, for New: waiters
// queue in the store and take the lock in their order, and
// WithQueuePosition tells each its place. A backend that queues waiters
// itself (etcd, ZooKeeper) is its own fair view. A backend with no queue
// gives an error matching ErrUnsupported that names it.
func Fair(b driver.Backend) (driver.Backend, error) {
	if f, ok := b.(driver.Fairer); ok {
		return f.FairView()
	}
	if _, ok := b.(driver.Queuer); ok {
		return b, nil
	}
	return nil, noKind(b, "fair lock", "driver.Fairer or driver.Queuer")
}

func noKind(b driver.Backend, kind, iface string) error {
	if b == nil {
		return ErrNilBackend
	}
	return fmt.Errorf("%w: %s has no %s (%s)", ErrUnsupported, driver.Name(b), kind, iface)
}

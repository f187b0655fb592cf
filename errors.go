package turnstile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/turnstilelock/turnstile/driver"
)

// Sentinel errors. Every error turnstile returns wraps one of these (or a
// context error), so callers branch with errors.Is.
var (
	// ErrNotAcquired: the lock is held by another owner and the attempt (or
	// every retry the policy allowed) failed.
	ErrNotAcquired = errors.New("turnstile: lock not acquired")

	// ErrLockLost: a held lease was lost — a renewal was refused by the
	// store, or the lease's local deadline passed without a confirmed
	// renewal. It is the cause of Lease.Context() in that case.
	ErrLockLost = errors.New("turnstile: lock lost")

	// ErrReleased is the cause of Lease.Context() after Release.
	ErrReleased = errors.New("turnstile: lease released")

	// ErrNotHeld: Release or Extend was refused because the caller no longer
	// holds the lock (it expired and perhaps another owner took it).
	ErrNotHeld = errors.New("turnstile: lock not held by this owner")

	// ErrInvalidKey: the key is empty or longer than MaxKeyLen bytes.
	ErrInvalidKey = errors.New("turnstile: invalid key")

	// ErrInvalidTTL: the TTL is below MinTTL (too short to be renewed in
	// time on a busy host) or above MaxTTL.
	ErrInvalidTTL = errors.New("turnstile: invalid ttl")

	// ErrInvalidOption: an option has a value that cannot work (negative
	// retries, a renewal interval not shorter than the TTL, ...).
	ErrInvalidOption = driver.ErrInvalidOption

	// ErrNilBackend: New was given a nil backend.
	ErrNilBackend = errors.New("turnstile: nil backend")

	// ErrNilClient: a nil *Client was used.
	ErrNilClient = errors.New("turnstile: nil client")

	// ErrUnknownScheme: Open was given a URL whose scheme no backend
	// registered.
	ErrUnknownScheme = errors.New("turnstile: unknown backend scheme")

	// ErrInvalidURL: Open was given a URL it cannot parse or use.
	ErrInvalidURL = errors.New("turnstile: invalid backend url")

	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("turnstile: client closed")

	// ErrRateLimited: the key is over its admission limit (WithAdmission)
	// and the caller chose to be refused, or was not admitted in time.
	ErrRateLimited = errors.New("turnstile: rate limited")

	// ErrUnsupported: the Client's backend lacks the capability a call
	// needs (Inspect and List need a driver.Inspector, ForceRelease a
	// driver.ForceReleaser, a lock kind its driver interface). The error
	// names the backend.
	ErrUnsupported = errors.New("turnstile: not supported by the backend")

	// ErrPermission: the store refused a command, a key or a node to the
	// user turnstile connects as (a Redis ACL, etcd's role permissions, a
	// ZooKeeper node's ACL, a database grant). The error names what was
	// refused; docs/security.md lists what each store's user needs.
	// Acquire does not retry it: it ends the wait at once.
	ErrPermission = errors.New("turnstile: permission denied by the lock store")
)

// LockError reports the operation, key and backend of a failure. It wraps
// the underlying error, so errors.Is(err, ErrNotAcquired) and
// errors.Is(err, context.Canceled) keep working.
type LockError struct {
	// Op is what failed: "acquire" (Acquire, TryAcquire, AcquireAll, Do,
	// DoAll), "admit" (the Admission of WithAdmission), "extend"
	// (Extend), "release" (Release), "hold" (Do, DoAll: the lease was
	// lost while fn ran), "inspect" (Inspect), "list" (List; Key is the
	// prefix) or "force release" (ForceRelease).
	Op      string
	Key     string
	Backend string
	Err     error
}

func (e *LockError) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = strings.TrimPrefix(e.Err.Error(), "turnstile: ")
	}
	if e.Backend == "" {
		return fmt.Sprintf("turnstile: %s %q: %s", e.Op, e.Key, msg)
	}
	return fmt.Sprintf("turnstile: %s %q on %s: %s", e.Op, e.Key, e.Backend, msg)
}

func (e *LockError) Unwrap() error { return e.Err }

// joinErrors is errors.Join on one line: the errors' texts joined by
// "; ", so that a log line stays one line. errors.Is and errors.As see
// every error, as with errors.Join. Nil errors are dropped; nil if all
// are.
func joinErrors(errs ...error) error {
	var j joinedErrors
	for _, err := range errs {
		if err != nil {
			j = append(j, err)
		}
	}
	switch len(j) {
	case 0:
		return nil
	case 1:
		return j[0]
	}
	return j
}

type joinedErrors []error

func (j joinedErrors) Error() string {
	parts := make([]string, len(j))
	for i, err := range j {
		parts[i] = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	return strings.Join(parts, "; ")
}

func (j joinedErrors) Unwrap() []error { return j }

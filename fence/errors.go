package fence

import (
	"errors"
	"fmt"
)

// Sentinel errors of this package, besides turnstile.ErrInvalidKey (an
// empty or too long resource or data key) and turnstile.ErrInvalidOption
// (any other bad argument).
var (
	// ErrStaleToken: the storage refused a write carrying a fencing token
	// not greater than the last one it accepted (or, with AllowSameToken,
	// smaller than it). Every *StaleTokenError matches it.
	ErrStaleToken = errors.New("turnstile/fence: stale fencing token")

	// ErrInvalidToken: the token is 0, which no lease carries, or, for
	// PostgreSQL, above math.MaxInt64, which a bigint column cannot hold.
	ErrInvalidToken = errors.New("turnstile/fence: invalid fencing token")

	// ErrCrossSlot: on Redis Cluster, the data key does not hash to the
	// resource's slot, so one script cannot check the guard and write the
	// key atomically. Build data keys with DataKey.
	ErrCrossSlot = errors.New("turnstile/fence: data key not in the resource's Redis Cluster hash slot")
)

// StaleTokenError: the storage refused a write whose token is not greater
// than the last one it accepted for the resource (or, with AllowSameToken,
// smaller than it). Nothing was written.
type StaleTokenError struct {
	Resource string
	Token    uint64 // the token the write carried
	Last     uint64 // the last token the storage accepted for Resource
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("turnstile: stale fencing token %d for %q: storage already accepted %d", e.Token, e.Resource, e.Last)
}

// Unwrap returns ErrStaleToken, so that errors.Is(err, ErrStaleToken)
// holds.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }

package idempotency

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error this package returns wraps one of these, an
// error of the store, a context error, or the error fn returned; callers
// branch with errors.Is. Bad input wraps turnstile.ErrInvalidKey or
// turnstile.ErrInvalidOption.
var (
	// ErrInProgress: another call with the same key is running fn right
	// now (and, WithWait, did not finish within the wait). Nothing ran.
	// The caller may retry later; the retry gets the stored result.
	ErrInProgress = errors.New("turnstile/idempotency: request in progress")

	// ErrClaimLost: fn ran, but the claim on the key ended before its
	// result could be stored — a renewal was refused, or renewals went
	// unconfirmed for a whole claim TTL — and another call may have
	// claimed the key since. The result was not stored, so it cannot
	// overwrite the other call's claim or result. It is also the cause
	// (context.Cause) of the context given to fn once the claim is lost.
	ErrClaimLost = errors.New("turnstile/idempotency: claim lost while the request ran; result not stored")

	// ErrNilClient: NewRedis was given a nil client, or NewPostgres a nil
	// pool.
	ErrNilClient = errors.New("turnstile/idempotency: nil client")

	// ErrBadRecord: what the store holds for a request key is neither a
	// claim nor a result this package wrote (a hand edit, another
	// program's key, a row changed by hand). Do fails with it rather than
	// guess: it neither runs fn nor replays on such a record. The error
	// names the part at fault (the value's tag or claim owner on Redis;
	// the column state, result or claim_owner on PostgreSQL), never the
	// stored result. Delete the record to let the request run again.
	ErrBadRecord = errors.New("turnstile/idempotency: stored record unreadable")

	// ErrNilFunc: Do was given a nil fn.
	ErrNilFunc = errors.New("turnstile/idempotency: nil fn")
)

// RequestError reports the store, step and request key of a failure of
// Do. It wraps the cause, so errors.Is(err, ErrInProgress) and
// errors.Is(err, context.Canceled) keep working. Errors of fn itself are
// returned as they are, never wrapped in a RequestError.
type RequestError struct {
	Op    string // "claim", "wait", "store result", "release claim", "do"
	Key   string
	Store string // "memory", "redis", "postgres"
	Err   error
}

func (e *RequestError) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = strings.TrimPrefix(e.Err.Error(), "turnstile/idempotency: ")
	}
	return fmt.Sprintf("turnstile/idempotency: %s: %s %q: %s", e.Store, e.Op, e.Key, msg)
}

// Unwrap returns the cause.
func (e *RequestError) Unwrap() error { return e.Err }

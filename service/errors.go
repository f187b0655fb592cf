package service

import (
	"context"
	"errors"
	"strings"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// Errors of the service itself, beside turnstile's.
var (
	errUnauthenticated = errors.New("no valid bearer token: send Authorization: Bearer NAME.SECRET")
	errRole            = errors.New("the token's role may not make this call")
	errKeyNotAllowed   = errors.New("the key is outside the token's prefixes")
	errRateLimited     = errors.New("the token is over its rate limit")
	errTooManyStreams  = errors.New("too many streams")
	errDraining        = errors.New("the instance is draining: call another")
)

// reasonError is an error with the reason and code the service reports
// for it.
type reasonError struct {
	code   connect.Code
	reason v1.ErrorReason
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// withReason gives err a code and reason.
func withReason(code connect.Code, reason v1.ErrorReason, err error) error {
	return &reasonError{code: code, reason: reason, err: err}
}

// classify returns the code and reason of err.
func classify(err error) (connect.Code, v1.ErrorReason) {
	var re *reasonError
	switch {
	case errors.As(err, &re):
		return re.code, re.reason
	case errors.Is(err, errUnauthenticated):
		return connect.CodeUnauthenticated, v1.ErrorReason_NO_TOKEN
	case errors.Is(err, errRole):
		return connect.CodePermissionDenied, v1.ErrorReason_ROLE_NOT_ALLOWED
	case errors.Is(err, errKeyNotAllowed):
		return connect.CodePermissionDenied, v1.ErrorReason_KEY_NOT_ALLOWED
	case errors.Is(err, errRateLimited):
		return connect.CodeResourceExhausted, v1.ErrorReason_RATE_LIMITED
	case errors.Is(err, errTooManyStreams):
		return connect.CodeResourceExhausted, v1.ErrorReason_TOO_MANY_STREAMS
	case errors.Is(err, errDraining), errors.Is(err, errClosing), errors.Is(err, turnstile.ErrClosed):
		return connect.CodeUnavailable, v1.ErrorReason_DRAINING
	case errors.Is(err, turnstile.ErrInvalidKey):
		return connect.CodeInvalidArgument, v1.ErrorReason_INVALID_KEY
	case errors.Is(err, turnstile.ErrInvalidTTL):
		return connect.CodeInvalidArgument, v1.ErrorReason_INVALID_TTL
	case errors.Is(err, turnstile.ErrInvalidOption):
		return connect.CodeInvalidArgument, v1.ErrorReason_INVALID_ARGUMENT
	case errors.Is(err, turnstile.ErrUnsupported):
		return connect.CodeUnimplemented, v1.ErrorReason_UNSUPPORTED
	case errors.Is(err, turnstile.ErrRateLimited):
		return connect.CodeResourceExhausted, v1.ErrorReason_RATE_LIMITED
	case errors.Is(err, turnstile.ErrPermission):
		return connect.CodePermissionDenied, v1.ErrorReason_STORE_PERMISSION
	case errors.Is(err, turnstile.ErrLockLost):
		return connect.CodeFailedPrecondition, v1.ErrorReason_LOCK_LOST
	case errors.Is(err, turnstile.ErrNotHeld):
		return connect.CodeFailedPrecondition, v1.ErrorReason_NOT_HELD
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded, v1.ErrorReason_ERROR_REASON_UNSPECIFIED
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled, v1.ErrorReason_ERROR_REASON_UNSPECIFIED
	case errors.Is(err, turnstile.ErrNotAcquired):
		// After ctx: a wait that ended by the caller's deadline is
		// DEADLINE_EXCEEDED, whatever else it met.
		return connect.CodeAborted, v1.ErrorReason_NOT_ACQUIRED
	}
	// Anything else came from the store, and the outcome of the call is
	// unknown (the driver's contract): the caller may retry, here or on
	// another instance.
	return connect.CodeUnavailable, v1.ErrorReason_STORE_UNAVAILABLE
}

// toConnect turns err into the error the service sends: its code, its
// reason in an ErrorInfo detail and in the Turnstile-Reason header, and
// its message without turnstile's prefix.
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	code, reason := classify(err)
	name := ""
	if reason != v1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		name = reason.String()
	}
	msg := strings.ReplaceAll(strings.TrimPrefix(err.Error(), "turnstile: "), ": turnstile: ", ": ")
	return apierr.New(code, name, errors.New(msg))
}

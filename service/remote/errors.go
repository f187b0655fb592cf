package remote

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

var (
	// errClosedConn: the backend was closed.
	errClosedConn = errors.New("turnstile service client closed")
	// errBatchAnswer: an instance answered a batch with another number
	// of results than it had ops (a bug, or not turnstile serve).
	errBatchAnswer = errors.New("the instance answered a batch with a wrong number of results")
)

// isReason reports whether err is the service's answer with reason r.
func isReason(err error, r v1.ErrorReason) bool {
	return apierr.Reason(err) == r.String()
}

// sentinels are the turnstile errors the service's reasons stand for.
var sentinels = map[string]error{
	v1.ErrorReason_NOT_ACQUIRED.String():     turnstile.ErrNotAcquired,
	v1.ErrorReason_NOT_HELD.String():         turnstile.ErrNotHeld,
	v1.ErrorReason_LOCK_LOST.String():        turnstile.ErrLockLost,
	v1.ErrorReason_INVALID_KEY.String():      turnstile.ErrInvalidKey,
	v1.ErrorReason_INVALID_TTL.String():      turnstile.ErrInvalidTTL,
	v1.ErrorReason_INVALID_ARGUMENT.String(): turnstile.ErrInvalidOption,
	v1.ErrorReason_UNSUPPORTED.String():      turnstile.ErrUnsupported,
	v1.ErrorReason_RATE_LIMITED.String():     turnstile.ErrRateLimited,
	// The service refusing a token, a key or a role is, to its client,
	// the store refusing its user: a permission no retry cures.
	v1.ErrorReason_STORE_PERMISSION.String(): turnstile.ErrPermission,
	v1.ErrorReason_KEY_NOT_ALLOWED.String():  turnstile.ErrPermission,
	v1.ErrorReason_ROLE_NOT_ALLOWED.String(): turnstile.ErrPermission,
	v1.ErrorReason_NO_TOKEN.String():         turnstile.ErrPermission,
}

// asDriverError is err as turnstile knows it: matching the sentinel its
// reason stands for (and a context's error for a cancelled or expired
// call), with the service's message.
func asDriverError(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	msg := strings.TrimPrefix(ce.Message(), "turnstile: ")
	if s, ok := sentinels[apierr.Reason(err)]; ok {
		return fmt.Errorf("%w: %s", s, strings.TrimPrefix(msg, strings.TrimPrefix(s.Error(), "turnstile: ")+": "))
	}
	switch ce.Code() {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return fmt.Errorf("%w: %s", turnstile.ErrPermission, msg)
	}
	return err
}

package fallback

import "errors"

// ErrPrimaryDown is returned for a call that must go to the primary (the
// renewal or release of a lease it granted, or a probe) while the circuit
// breaker holds the primary to be down: the primary was not called.
var ErrPrimaryDown = errors.New("fallback: primary store held down by the circuit breaker")

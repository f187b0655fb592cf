package fallback

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sony/gobreaker/v2"

	"github.com/turnstilelock/turnstile"
)

// State is the state of this process's breaker in front of the primary
// store: its view of the primary's health. Which store serves is the
// pair's state (Serving), which every process of the pair shares.
type State int

// Breaker states.
const (
	// StateClosed: the primary answers this process.
	StateClosed State = iota
	// StateHalfOpen: the primary is being probed.
	StateHalfOpen
	// StateOpen: the primary failed this process's calls; they do not
	// reach it until the open timeout has passed.
	StateOpen
)

func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return "unknown"
}

func fromBreaker(s gobreaker.State) State {
	switch s {
	case gobreaker.StateHalfOpen:
		return StateHalfOpen
	case gobreaker.StateOpen:
		return StateOpen
	}
	return StateClosed
}

// store names which of the two stores a call goes to.
type store int

const (
	primary store = iota
	secondary
)

func (s store) String() string {
	if s == primary {
		return "primary"
	}
	return "secondary"
}

// callerDoneError marks an error that came with the caller's own context
// ending: it says nothing about the store, so the breaker ignores it.
type callerDoneError struct{ err error }

func (e *callerDoneError) Error() string { return e.err.Error() }
func (e *callerDoneError) Unwrap() error { return e.err }

// notAFailure reports whether err, from the primary, is a refusal of
// what was asked rather than a failure of the store: a semaphore's
// number of permits other than the one its holders hold, or a lock kind
// the store does not have.
func notAFailure(err error) bool {
	return errors.Is(err, turnstile.ErrInvalidOption) || errors.Is(err, turnstile.ErrUnsupported)
}

// newBreaker returns a closed breaker for b's primary. It opens after
// tripAfter consecutive failures, or at the first failure to reach a
// primary that has not answered this process yet (a member opened from a
// URL that refused the connection): a fresh process must not wait for
// several calls to fail before the pair can switch.
func newBreaker(b *Backend) *gobreaker.CircuitBreaker[bool] {
	trip := b.cfg.tripAfter
	p := b.pair
	return gobreaker.NewCircuitBreaker[bool](gobreaker.Settings{
		Name:        "fallback " + b.names[primary],
		MaxRequests: 1,
		Timeout:     b.cfg.openTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= trip || (!p.answered.Load() && p.unreached.Load())
		},
		IsExcluded: func(err error) bool {
			var d *callerDoneError
			return errors.As(err, &d)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.stateChanged(fromBreaker(from), fromBreaker(to))
		},
	})
}

// stateChanged logs a change of the breaker's state and reports it. It
// may run under the breaker's lock: the pair's phase follows on the next
// call (route).
func (b *Backend) stateChanged(from, to State) {
	level := slog.LevelInfo
	if to == StateOpen {
		level = slog.LevelWarn
	}
	b.cfg.logger.LogAttrs(context.Background(), level, "turnstile fallback: breaker state changed",
		slog.String("from", from.String()), slog.String("to", to.String()), slog.String("primary", b.names[primary]))
	if b.cfg.onChange != nil {
		b.cfg.onChange(from, to)
	}
}

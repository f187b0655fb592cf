package fallback

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sony/gobreaker/v2"
)

// State is the state of the breaker in front of the primary store.
type State int

// Breaker states.
const (
	// StateClosed: the primary is healthy and serves every call.
	StateClosed State = iota
	// StateHalfOpen: the primary is being probed; the secondary still
	// serves acquisitions.
	StateHalfOpen
	// StateOpen: the primary failed; the secondary serves acquisitions.
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

// target is the store that serves acquisitions in breaker state s: the
// secondary keeps serving while the primary is only being probed.
func target(s State) store {
	if s == StateClosed {
		return primary
	}
	return secondary
}

// callerDoneError marks an error that came with the caller's own context
// ending: it says nothing about the store, so the breaker ignores it.
type callerDoneError struct{ err error }

func (e *callerDoneError) Error() string { return e.err.Error() }
func (e *callerDoneError) Unwrap() error { return e.err }

func newBreaker(b *Backend) *gobreaker.CircuitBreaker[bool] {
	trip := b.cfg.tripAfter
	return gobreaker.NewCircuitBreaker[bool](gobreaker.Settings{
		Name:        "fallback " + b.names[primary],
		MaxRequests: 1,
		Timeout:     b.cfg.openTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= trip },
		IsExcluded: func(err error) bool {
			var d *callerDoneError
			return errors.As(err, &d)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.stateChanged(fromBreaker(from), fromBreaker(to))
		},
	})
}

// stateChanged runs under the breaker's lock. When the store that serves
// acquisitions changes, it starts a new epoch: leases of earlier epochs can
// no longer be extended, and the new store grants nothing until grace has
// passed, by which time every lock the old store granted has expired.
func (b *Backend) stateChanged(from, to State) {
	now := time.Now()
	b.sw.mu.Lock()
	switched := target(from) != target(to)
	if switched {
		b.sw.epoch++
		b.sw.target = target(to)
		b.sw.gateUntil = now.Add(b.cfg.grace)
	}
	serving := b.sw.target
	b.sw.mu.Unlock()

	level := slog.LevelInfo
	if to == StateOpen {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("from", from.String()), slog.String("to", to.String()),
		slog.String("serving", b.names[serving]),
	}
	if switched {
		attrs = append(attrs, slog.Duration("grace", b.cfg.grace))
	}
	b.cfg.logger.LogAttrs(context.Background(), level, "turnstile fallback: breaker state changed", attrs...)
	if b.cfg.onChange != nil {
		b.cfg.onChange(from, to)
	}
}

// route returns the store that serves acquisitions now, the current epoch,
// and whether that store must still refuse new locks (grace not over).
func (b *Backend) route() (s store, epoch uint64, gated bool) {
	b.sw.mu.Lock()
	defer b.sw.mu.Unlock()
	return b.sw.target, b.sw.epoch, time.Now().Before(b.sw.gateUntil)
}

// currentEpoch returns the epoch and the store serving it.
func (b *Backend) currentEpoch() (uint64, store) {
	b.sw.mu.Lock()
	defer b.sw.mu.Unlock()
	return b.sw.epoch, b.sw.target
}

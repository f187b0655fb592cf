package events

import (
	"crypto/rand"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/turnstilelock/turnstile"
)

// Topic is the Kafka topic lock events go to unless WithTopic names
// another.
const Topic = "lock-events"

// Version is the version of the JSON shape of Event that this package
// writes. A consumer reads the "version" field first and refuses, or
// handles separately, versions it does not know.
const Version = 1

// Event types, the values of Event.Type.
const (
	TypeAcquired = "ACQUIRED"
	TypeReleased = "RELEASED"
	TypeExtended = "EXTENDED"
	TypeLost     = "LOST"
	TypeFailed   = "FAILED"
	// TypeForceReleased: an operator removed the lock whoever held it
	// (Client.ForceRelease, turnstile unlock --force); Owner is the
	// removed holder's, Token the fence floor of the removal: at least
	// the removed lease's token, also one its Client handed on without
	// the store, and below every later lease's. So a consumer ordering by
	// token (package consume) applies it after the removed lease's
	// events and before the next lease's.
	TypeForceReleased = "FORCE_RELEASED"
)

// Sentinel errors of this package and of package outbox.
var (
	// ErrInvalidEvent: an Event is missing a field every event has, or has
	// an unknown type or version.
	ErrInvalidEvent = errors.New("turnstile/events: invalid event")

	// ErrClosed: the publisher was closed.
	ErrClosed = errors.New("turnstile/events: publisher closed")

	// ErrTooLarge: the broker (or the producer, before sending) refused
	// an event as larger than a record may be: the topic's
	// max.message.bytes, the broker's message.max.bytes or the producer's
	// batch limit. Sending it again fails again; package outbox's Relay
	// moves such an event aside (see its package doc).
	ErrTooLarge = errors.New("turnstile/events: event too large for the broker")
)

// Event is the versioned JSON value of one Kafka record; the record's key
// is the lock key, so that one lock's events stay in one partition, in
// order.
type Event struct {
	Version    int       `json:"version"`
	ID         string    `json:"id"`   // unique per event: consumers drop an id they have seen
	Type       string    `json:"type"` // TypeAcquired, TypeReleased, TypeExtended, TypeLost, TypeFailed
	Key        string    `json:"key"`
	Owner      string    `json:"owner,omitempty"` // the lease's owner id
	Token      uint64    `json:"token,omitempty"` // the lease's fencing token (FORCE_RELEASED: the fence floor)
	ValidityMs int64     `json:"validity_ms,omitempty"`
	Timestamp  time.Time `json:"timestamp"` // when it happened, UTC
	Backend    string    `json:"backend,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// New returns an event of type typ for key with Version, a new ID and the
// current time set; the caller fills in the rest. It is meant for events
// written to the outbox next to a database change.
func New(typ, key string) Event {
	return Event{Version: Version, ID: NewID(), Type: typ, Key: key, Timestamp: time.Now().UTC().Round(0)}
}

// NewID returns a new event id: 128 random bits (crypto/rand) in base32,
// 26 characters.
func NewID() string { return rand.Text() }

var lockTypes = map[turnstile.EventType]string{
	turnstile.EventAcquired: TypeAcquired,
	turnstile.EventReleased: TypeReleased,
	turnstile.EventExtended: TypeExtended,
	turnstile.EventLost:     TypeLost,
	turnstile.EventFailed:   TypeFailed,

	turnstile.EventForceReleased: TypeForceReleased,
}

// FromLock converts a lock event of a turnstile Client. ACQUIRED,
// RELEASED, EXTENDED, LOST, FAILED and FORCE_RELEASED convert, with a new ID; WAITING and
// RENEW_FAILED are progress reports of an operation whose outcome follows
// as one of those, so they do not convert and ok is false.
func FromLock(e turnstile.Event) (ev Event, ok bool) {
	typ, ok := lockTypes[e.Type]
	if !ok {
		return Event{}, false
	}
	ts := e.Time
	if ts.IsZero() {
		ts = time.Now()
	}
	ev = Event{
		Version:    Version,
		ID:         NewID(),
		Type:       typ,
		Key:        e.Key,
		Owner:      e.Owner,
		Token:      e.Token,
		ValidityMs: e.Validity.Milliseconds(),
		Timestamp:  ts.UTC().Round(0),
		Backend:    e.Backend,
	}
	if e.Err != nil {
		ev.Error = e.Err.Error()
	}
	return ev, true
}

// Validate reports, as a *FieldError (which matches ErrInvalidEvent), an
// event that no consumer could use or that JSON cannot carry unchanged: a
// version other than Version, an empty ID or key, an unknown type, a zero
// timestamp or one outside the years 0 to 9999, or a string field that is
// not valid UTF-8 (JSON would replace its bad bytes).
func (ev Event) Validate() error {
	switch {
	case ev.Version != Version:
		return &FieldError{Field: "version", Reason: fmt.Sprintf("version %d, want %d", ev.Version, Version)}
	case ev.ID == "":
		return &FieldError{Field: "id", Reason: "empty"}
	case ev.Key == "":
		return &FieldError{Field: "key", Reason: "empty"}
	case ev.Timestamp.IsZero():
		return &FieldError{Field: "timestamp", Reason: "zero"}
	case ev.Timestamp.Year() < 0 || ev.Timestamp.Year() > 9999:
		return &FieldError{Field: "timestamp", Reason: "outside the years 0 to 9999"}
	}
	for _, f := range [...]struct{ name, v string }{
		{"id", ev.ID}, {"type", ev.Type}, {"key", ev.Key}, {"owner", ev.Owner}, {"backend", ev.Backend}, {"error", ev.Error},
	} {
		if !utf8.ValidString(f.v) {
			return &FieldError{Field: f.name, Reason: "not valid UTF-8"}
		}
	}
	switch ev.Type {
	case TypeAcquired, TypeReleased, TypeExtended, TypeLost, TypeFailed, TypeForceReleased:
		return nil
	}
	return &FieldError{Field: "type", Reason: "unknown type " + describe(ev.Type)}
}

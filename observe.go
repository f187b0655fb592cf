package turnstile

import (
	"fmt"
	"time"
)

// EventType says what happened to a lock.
type EventType uint8

// Event types, in the order a lease meets them.
const (
	// EventWaiting: an Acquire found the lock held and starts waiting.
	// With coalescing (the default) a Client serves its waiters for a
	// key first come first served: an Acquire that starts after another
	// one's EventWaiting is served after it.
	// The same call ends with EventAcquired or EventFailed, Waited set.
	EventWaiting EventType = iota + 1
	// EventAcquired: a lease was granted. Wait, Retries, Token, Validity
	// are set.
	EventAcquired
	// EventFailed: an acquisition ended without a lease. Err matches
	// ErrNotAcquired (the lock stayed held), a context error, or is a
	// store error.
	EventFailed
	// EventExtended: a renewal was confirmed by the store — by the
	// watchdog (Renewal set) or by Lease.Extend. Validity is the new one.
	EventExtended
	// EventRenewFailed: a watchdog renewal failed with a store error or
	// timed out. The lease is still held; the renewal is retried until the
	// lease's deadline. Err is the store error.
	EventRenewFailed
	// EventReleased: the holder called Release on a held lease (once per
	// lease, even if Release is called again after a store error). Err is
	// set when the store failed or found the lock no longer held.
	EventReleased
	// EventLost: the lease ended without Release. Err is the cause: it
	// matches ErrLockLost (the store refused a renewal — Refused set — or
	// the local deadline passed), or ErrClosed after Client.Close.
	EventLost
	// EventForceReleased: an operator removed a lock with ForceRelease,
	// whoever held it. Key and Owner are the removed holder's; Token is the
	// fence floor ForceRelease raised the key to: at least the removed
	// holder's token (also of a lease that a Client handed over without the
	// store, whose token may exceed the store's grant: driver.TokenRoom) and
	// below every later token, so that a consumer ordering a key's events by
	// token places it after the removed holder's and before the next
	// holder's. A lock with several holders (a semaphore, read locks) gives
	// one event per holder. The holder itself learns it at its next renewal
	// (EventLost).
	EventForceReleased
)

var eventNames = [...]string{
	EventWaiting:       "WAITING",
	EventAcquired:      "ACQUIRED",
	EventFailed:        "FAILED",
	EventExtended:      "EXTENDED",
	EventRenewFailed:   "RENEW_FAILED",
	EventReleased:      "RELEASED",
	EventLost:          "LOST",
	EventForceReleased: "FORCE_RELEASED",
}

// String returns the event type's name in capitals, as the event log and
// the CLI print them:
// "ACQUIRED", "RELEASED", "EXTENDED", "LOST", "FAILED", and "WAITING",
// "RENEW_FAILED", "FORCE_RELEASED".
func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is one thing that happened to a lock of a Client. Fields that do
// not apply to the Type are zero.
type Event struct {
	Type    EventType
	Time    time.Time // when it happened
	Backend string    // the store, as in errors ("redis 127.0.0.1:6379")
	Key     string
	Owner   string // the lease's owner id (empty for EventWaiting and EventFailed)
	Token   uint64 // the lease's fencing token

	// Validity is how long the lease is certainly still held, right after
	// EventAcquired or EventExtended.
	Validity time.Duration
	// Wait is how long the acquisition took, from the call to its outcome
	// (EventAcquired, EventFailed).
	Wait time.Duration
	// Retries is how many attempts the acquisition made after its first
	// (EventAcquired, EventFailed).
	Retries int
	// Waited: the acquisition waited for the lock (EventWaiting was sent
	// for it).
	Waited bool
	// Renewal: the watchdog, not the holder, renewed the lease
	// (EventExtended, EventRenewFailed, EventLost).
	Renewal bool
	// Refused: the store answered that the owner no longer holds the lock
	// (EventLost, EventReleased).
	Refused bool
	// Err is the failure or cause (EventFailed, EventRenewFailed,
	// EventReleased, EventLost).
	Err error
}

// An Observer is told about every lock operation of the Clients it is
// given to (WithObserver): metrics, audit events, logs. Observe runs on
// the lock path, synchronously and from many goroutines at once: it must
// be safe for concurrent use, must not block and must not call back into
// the Client. Package turnstile/metrics counts events for Prometheus;
// package turnstile/events publishes them to Kafka.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc lets an ordinary function be an Observer.
type ObserverFunc func(e Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// WithObserver adds an Observer: every event of the Client (given to New)
// or of one call (given to Acquire, TryAcquire or Do) goes to it, after
// the observers added before it. Default: none.
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalidOption)
		}
		// A per-call option works on a copy of the Client's config: never
		// append into the Client's own backing array.
		obs := make([]Observer, 0, len(c.observers)+1)
		c.observers = append(append(obs, c.observers...), o)
		return nil
	}
}

// emit sends e to every observer of cfg.
func (c *Client) emit(cfg *config, e Event) {
	if len(cfg.observers) == 0 {
		return
	}
	e.Backend = c.name
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	for _, o := range cfg.observers {
		o.Observe(e)
	}
}

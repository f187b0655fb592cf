package turnstile

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Limits on what Acquire accepts. Values outside them are rejected at once,
// before any round trip.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 512
	// MinTTL is the shortest lease TTL. A shorter lease would be lost
	// on a busy host although its holder is alive: the watchdog renews at
	// a third of the TTL, and each renewal must reach the store and come
	// back — a round trip, plus scheduling delays that reach tens of
	// milliseconds when the host is loaded, plus the clock-drift
	// allowance — before the TTL minus that allowance runs out. At 200 ms
	// a renewal may be late by about 130 ms, two renewal periods, and the
	// lease still holds.
	MinTTL = 200 * time.Millisecond
	// MaxTTL is the longest lease TTL. Long jobs keep a short TTL and let the
	// watchdog renew it; a huge TTL only delays recovery after a crash.
	MaxTTL = 24 * time.Hour
)

// Defaults.
const (
	DefaultTTL          = 30 * time.Second
	DefaultBackoffBase  = 10 * time.Millisecond
	DefaultBackoffCap   = time.Second
	DefaultMaxRetries   = 10
	DefaultDriftFactor  = 0.01
	DefaultDriftMinimum = 2 * time.Millisecond
)

// config is the set of settings a Client starts with; per-call options are
// applied to a copy.
type config struct {
	ttl         time.Duration
	renewEvery  time.Duration // 0: ttl/3
	watchdog    bool
	backoff     Backoff
	instanceID  string
	logger      *slog.Logger
	driftFactor float64
	driftFixed  time.Duration
	owner       string // fixed owner id (WithOwner); empty: a fresh one per lease
	position    func(int)
	admission   Admission
	overLimit   OverLimit
	busyQueue   driver.Queuer // queue when retries run high (WithQueueWhenBusy); nil: the backend's
	busyAt      float64       // mean retries per acquisition above which to queue; 0: off
	observers   []Observer
	notify      bool // wait for release notices where the store sends them
	// election: the lock is an election's, held under an owner id that
	// carries the leader's value. Its release sends the store's notice in
	// any case, also where the store sends it only when someone failed to
	// take the lock meanwhile (the observers wait for it, trying
	// nothing), and it is never handed over without the store (the next
	// leader is known by an owner id of its own). Set by Campaign only.
	election bool
	coalesce bool // waiters of one Client for one key queue locally
	perCall  bool // the options being applied were given to one call
}

func defaultConfig() config {
	return config{
		ttl:         DefaultTTL,
		watchdog:    true,
		backoff:     Exponential{Base: DefaultBackoffBase, Cap: DefaultBackoffCap, MaxRetries: DefaultMaxRetries},
		driftFactor: DefaultDriftFactor,
		driftFixed:  DefaultDriftMinimum,
		notify:      true,
		coalesce:    true,
	}
}

// An Option changes a setting. Options given to New apply to every call of
// the Client; options given to Acquire, TryAcquire or Do apply to that call.
// A few settings belong to the Client as a whole (WithLogger,
// WithQueueWhenBusy): given to a single call they are refused with
// ErrInvalidOption. Each option's doc says where it applies.
type Option func(*config) error

// clientWide refuses an option that belongs to the Client when it is
// given to a single call.
func (c *config) clientWide(name string) error {
	if c.perCall {
		return fmt.Errorf("%w: %s applies to the whole Client: give it to New or Open, not to one call", ErrInvalidOption, name)
	}
	return nil
}

// WithTTL sets the lease TTL: how long the store keeps the lock if the
// holder stops renewing it (crash, partition). Default 30 s. It must lie in
// [MinTTL, MaxTTL].
func WithTTL(ttl time.Duration) Option {
	return func(c *config) error {
		if err := checkTTL(ttl); err != nil {
			return err
		}
		c.ttl = ttl
		return nil
	}
}

// WithRenewInterval sets how often the watchdog renews a held lease.
// Default: a third of the TTL. It must be positive and shorter than the
// TTL minus the clock-drift allowance.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: renew interval %v must be positive", ErrInvalidOption, d)
		}
		c.renewEvery = d
		return nil
	}
}

// WithoutWatchdog turns automatic renewal off: the lease lives for its TTL
// unless the holder calls Extend. Its context is still cancelled, with
// ErrLockLost, when the TTL (minus drift) has passed. Default: watchdog on.
func WithoutWatchdog() Option {
	return func(c *config) error {
		c.watchdog = false
		return nil
	}
}

// WithBackoff sets how Acquire waits between attempts while the lock is
// held by someone else. Default: Exponential{Base: 10 ms, Cap: 1 s,
// MaxRetries: 10} with full jitter.
func WithBackoff(b Backoff) Option {
	return func(c *config) error {
		if b == nil {
			return fmt.Errorf("%w: nil backoff", ErrInvalidOption)
		}
		if v, ok := b.(interface{ validate() error }); ok {
			if err := v.validate(); err != nil {
				return err
			}
		}
		c.backoff = b
		return nil
	}
}

// WithInstanceID sets the instance part of owner ids, which shows in the
// store next to the 128-bit random part (for example "orders-7f9c/..."), so
// an operator can tell which instance holds a lock. Default: host name and
// process id. It must be 1 to 64 bytes without '/'.
func WithInstanceID(id string) Option {
	return func(c *config) error {
		if id == "" || len(id) > 64 {
			return fmt.Errorf("%w: instance id must be 1 to 64 bytes, got %d", ErrInvalidOption, len(id))
		}
		for i := 0; i < len(id); i++ {
			if id[i] == '/' || id[i] < 0x20 {
				return fmt.Errorf("%w: instance id %q contains '/' or a control character", ErrInvalidOption, id)
			}
		}
		c.instanceID = id
		return nil
	}
}

// WithoutNotifications makes Acquire poll with its Backoff only, even
// when the store sends release notices (driver.Notifier: Redis pub/sub,
// PostgreSQL NOTIFY). Default: a waiter retries as soon as a notice says
// the lock was released, with the Backoff as a safety net for lost
// notices.
func WithoutNotifications() Option {
	return func(c *config) error {
		c.notify = false
		return nil
	}
}

// WithoutCoalescing lets every waiting Acquire call contend with the store
// on its own. Default: the waiters of one Client for one key queue
// locally, first come first served, and only the head of that line makes
// store round trips, so a release costs one attempt per waiting process
// instead of one per waiting goroutine.
func WithoutCoalescing() Option {
	return func(c *config) error {
		c.coalesce = false
		return nil
	}
}

// WithOwner fixes the owner id a lock is taken under, instead of a fresh
// random one per lease. It is for reentrant locks (a store's reentrant
// view, such as the redis package's Reentrant): the same owner takes the
// lock again without waiting for itself, and must release it as many
// times. Owner identity is always explicit — never a goroutine or thread
// id. Never give one owner id to two independent workers: each could
// then release the other's lock. The id must be 1 to 256
// bytes without control characters.
func WithOwner(id string) Option {
	return func(c *config) error {
		if id == "" || len(id) > 256 {
			return fmt.Errorf("%w: owner id must be 1 to 256 bytes, got %d", ErrInvalidOption, len(id))
		}
		for i := 0; i < len(id); i++ {
			if id[i] < 0x20 || id[i] == 0x7f {
				return fmt.Errorf("%w: owner id %q contains a control character", ErrInvalidOption, id)
			}
		}
		c.owner = id
		return nil
	}
}

// WithQueuePosition asks to be told which place the caller has in a
// line — 1 is next — whenever it changes, so a service can show "you are
// N-th in line": while Acquire waits in a store's queue (the redis
// package's Fair view, etcd's and ZooKeeper's queues; a waiter that asks
// there watches the whole queue instead of its predecessor alone, and so
// wakes at every change of it), and while it waits in the admission line
// of QueueOverLimit. A store may learn of a move late and skip a place.
// f runs on the waiting goroutine and must not block.
func WithQueuePosition(f func(position int)) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil queue position function", ErrInvalidOption)
		}
		c.position = f
		return nil
	}
}

// DefaultBusyRetries is the mean number of retries per acquisition above
// which WithQueueWhenBusy switches to queueing.
const DefaultBusyRetries = 5

// WithQueueWhenBusy sets the waiting policy "retry first, queue when
// retries run high" (see busy.go for the details). While a key's recent
// acquisitions needed at most threshold retries on average, Acquire
// retries with the Client's Backoff (and at once on a release notice);
// a caller that has retried more than threshold times joins q, a store's
// first-come-first-served queue on the same locks, and once the key's
// mean exceeds threshold callers queue at once. Queued callers can learn
// their place with WithQueuePosition.
//
// q is the queue: a view of the same locks whose waiters the store
// queues (a driver.Queuer), as turnstile.Fair returns it for a Redis
// backend; nil means the Client's own backend, which must then queue
// (etcd, ZooKeeper, a Fair view). A q that does not queue is refused
// with ErrInvalidOption. Without this option a backend that queues always
// queues, and others always retry. threshold 0 means DefaultBusyRetries;
// it must lie in (0, 1e6]. The means are kept per key, in this process.
// It applies to the whole Client: give it to New or Open.
func WithQueueWhenBusy(q driver.Backend, threshold float64) Option {
	return func(c *config) error {
		if err := c.clientWide("WithQueueWhenBusy"); err != nil {
			return err
		}
		if threshold == 0 {
			threshold = DefaultBusyRetries
		}
		if threshold < 0 || threshold != threshold || threshold > 1e6 {
			return fmt.Errorf("%w: busy threshold %v must be in (0, 1e6]", ErrInvalidOption, threshold)
		}
		if q != nil {
			queue, ok := q.(driver.Queuer)
			if !ok {
				return fmt.Errorf("%w: WithQueueWhenBusy: %s does not queue its waiters (no driver.Queuer): pass its fair view (turnstile.Fair)", ErrInvalidOption, driver.Name(q))
			}
			c.busyQueue = queue
		}
		c.busyAt = threshold
		return nil
	}
}

// WithLogger sets where the Client reports lost leases and failed
// renewals. Default: nowhere. It applies to the whole Client: give it to
// New or Open.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if err := c.clientWide("WithLogger"); err != nil {
			return err
		}
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// WithClockDrift sets the allowance for clock drift between this process
// and the store: a lease is treated as lost locally factor×TTL + fixed
// before the store would expire it. Default: 0.01×TTL + 2 ms,
// with the fixed part never more than a quarter of the TTL.
func WithClockDrift(factor float64, fixed time.Duration) Option {
	return func(c *config) error {
		if factor < 0 || factor >= 0.5 || factor != factor {
			return fmt.Errorf("%w: drift factor %v must be in [0, 0.5)", ErrInvalidOption, factor)
		}
		if fixed < 0 {
			return fmt.Errorf("%w: fixed drift %v must not be negative", ErrInvalidOption, fixed)
		}
		c.driftFactor, c.driftFixed = factor, fixed
		return nil
	}
}

// drift is the part of ttl that is not trusted, because the clocks of this
// process and of the store do not run at exactly the same rate.
func (c *config) drift(ttl time.Duration) time.Duration {
	fixed := min(c.driftFixed, ttl/4)
	return time.Duration(float64(ttl)*c.driftFactor) + fixed
}

// renewInterval is the watchdog period for ttl.
func (c *config) renewInterval(ttl time.Duration) time.Duration {
	if c.renewEvery > 0 {
		return c.renewEvery
	}
	return max(ttl/3, time.Microsecond)
}

// check validates the settings as a whole, after every option ran.
func (c *config) check() error {
	if c.watchdog && c.renewEvery > 0 && c.renewEvery >= c.ttl-c.drift(c.ttl) {
		return fmt.Errorf("%w: renew interval %v must be shorter than the ttl %v minus drift %v",
			ErrInvalidOption, c.renewEvery, c.ttl, c.drift(c.ttl))
	}
	return nil
}

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return c.check()
}

func checkTTL(ttl time.Duration) error {
	if ttl < MinTTL {
		return fmt.Errorf("%w: %v is shorter than %v; %s", ErrInvalidTTL, ttl, MinTTL, minTTLReason)
	}
	if ttl > MaxTTL {
		return fmt.Errorf("%w: %v is longer than %v", ErrInvalidTTL, ttl, MaxTTL)
	}
	return nil
}

// minTTLReason says, in error messages, why a TTL under MinTTL is refused.
const minTTLReason = "a shorter lease would expire before the watchdog could renew it on a busy host (renewal round trip, scheduling delay and clock drift)"

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

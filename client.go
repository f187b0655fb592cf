// Package turnstile makes "exactly one executor per resource" hold across
// processes and machines.
//
// A Client takes leases on keys from a store (a driver.Backend: Redis,
// etcd, ZooKeeper, PostgreSQL, MySQL, or the in-process memory backend).
// Each Lease carries a fencing token that is strictly greater than every
// token issued before it for the same key, and a context that is cancelled
// the moment the lease is lost or released. While a lease is held, the
// Client's watchdog renews it in the store every TTL/3.
//
// # What a lease guarantees
//
// A lock service alone cannot stop a holder that was paused (GC, VM
// stall, swapped out) past its TTL from acting after another holder took
// over: when it wakes up it does not yet know. Two things close that gap.
// First, Lease.Context() is cancelled as soon as the lease's conservative
// local deadline passes without a confirmed renewal — measured from when
// the last successful renewal was sent, minus an allowance for clock drift
// — so a holder that checks its context stops in time, even if the store
// never answers. Second, and only this is safe against arbitrary pauses,
// the storage that the holder writes to checks the fencing token and
// refuses writes whose token is not greater than the last one it accepted
// (package fence). See docs/guarantees.md for each backend's limits.
package turnstile

import (
	"context"
	"crypto/rand"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Client takes leases from one backend. It is safe for concurrent use; make
// one per backend and share it.
type Client struct {
	backend     driver.Backend
	name        string
	cfg         config
	ownsBackend bool // Close closes the backend (set by Open)

	wd    *watchdog
	lines lineSet[*waiter, *line] // this Client's waiters per key

	admissions lineSet[*admitWaiter, *admissionLine] // callers over a rate limit
	busy       *busyMeter                            // WithQueueWhenBusy
	shared     bool                                  // the backend's locks may have several holders
	holdsTTL   bool                                  // the backend can keep a lock delay (driver.TTLHolder)
	// notices is the backend's release that says when to send the
	// release notice and whether someone else tried the lock, nil where
	// its Release always sends one; tokenRoom is driver.TokenRoom's, or
	// 0: no handoffs without the store (handoff.go).
	notices   driver.NoticeReleaser
	tokenRoom uint64
	// trying holds the key hash of a caller making a first attempt, in a
	// slot chosen by that hash, so that a caller for the same key lines up
	// behind it instead. Different keys with one 64-bit hash would line
	// up needlessly, never wrongly.
	trying [256]atomic.Uint64
	seed   maphash.Seed
	closed atomic.Bool
	// life ends at Close (cause ErrClosed), and with it every wait of
	// the Client's calls; closing is its Done channel.
	life    context.Context
	end     context.CancelCauseFunc
	closing <-chan struct{}
	bg      cleanups // releases of locks nobody will use
}

// New returns a Client that takes locks from backend.
func New(backend driver.Backend, opts ...Option) (*Client, error) {
	if driver.IsNil(backend) {
		return nil, ErrNilBackend
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if cfg.instanceID == "" {
		cfg.instanceID = defaultInstanceID()
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{backend: backend, cfg: cfg, name: driver.Name(backend), seed: maphash.MakeSeed()}
	c.life, c.end = context.WithCancelCause(context.Background())
	c.closing = c.life.Done()
	if sh, ok := backend.(driver.Shared); ok {
		c.shared = sh.Shared()
	}
	c.notices, _ = backend.(driver.NoticeReleaser)
	c.holdsTTL = driver.HoldsTTL(backend)
	if tr, ok := backend.(driver.TokenRoom); ok && tr.TokenRoom() > 1 {
		c.tokenRoom = tr.TokenRoom()
	}
	if cfg.busyAt > 0 {
		if c.cfg.busyQueue == nil {
			q, ok := backend.(driver.Queuer)
			if !ok {
				return nil, fmt.Errorf("%w: WithQueueWhenBusy(nil, …) needs a backend that queues waiters (a driver.Queuer); %s does not: pass its queue", ErrInvalidOption, c.name)
			}
			c.cfg.busyQueue = q
		}
		c.busy = newBusyMeter()
	}
	if err := c.checkLockDelay(&c.cfg); err != nil {
		return nil, err
	}
	c.wd = newWatchdog(c)
	return c, nil
}

func defaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	id := fmt.Sprintf("%s-%d", host, os.Getpid())
	if len(id) > 64 {
		id = id[len(id)-64:]
	}
	return id
}

// Backend returns the store the Client uses.
func (c *Client) Backend() driver.Backend { return c.backend }

// Acquire takes the lock on key, waiting while another owner holds it: it
// retries according to the Backoff (default: exponential with full jitter,
// 10 retries) until the lock is taken, the retries are used up
// (ErrNotAcquired), or ctx is done (an error that matches ctx.Err() with
// errors.Is). The returned lease is renewed by the watchdog until it is
// released or lost.
func (c *Client) Acquire(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.acquire(ctx, key, opts, true, "")
}

// TryAcquire makes one attempt to take the lock on key. It returns an error
// matching ErrNotAcquired if another owner holds it.
func (c *Client) TryAcquire(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return c.acquire(ctx, key, opts, false, "")
}

// acquire takes key's lock with the Client's settings and opts; wait says
// whether it waits (Acquire) or tries once (TryAcquire). leader, when
// set, makes it a Campaign's: the leader's value takes the place of the
// instance id in the owner id (each attempt still has an owner id of its
// own), and the lease is an election's (config.election).
func (c *Client) acquire(ctx context.Context, key string, opts []Option, wait bool, leader string) (*Lease, error) {
	if c == nil {
		return nil, ErrNilClient
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	cfg := &c.cfg
	if len(opts) > 0 || leader != "" {
		own := c.cfg
		own.perCall = true
		if err := own.apply(opts); err != nil {
			return nil, err
		}
		if leader != "" {
			own.instanceID, own.election = leader, true
		}
		if err := c.checkLockDelay(&own); err != nil {
			return nil, err
		}
		cfg = &own
	}
	if c.closed.Load() {
		return nil, c.wrap("acquire", key, ErrClosed)
	}
	start := now()
	if cfg.admission != nil {
		if err := c.admit(ctx, key, cfg); err != nil {
			c.emit(cfg, Event{Type: EventFailed, Key: key, Wait: time.Duration(now() - start), Err: err})
			return nil, err
		}
	}
	l, retries, waited, err := c.attempt(ctx, key, cfg, wait)
	if len(cfg.observers) > 0 {
		e := Event{Key: key, Wait: time.Duration(now() - start), Retries: retries, Waited: waited, Err: err}
		if err != nil {
			e.Type = EventFailed
		} else {
			e.Type, e.Owner, e.Token, e.Validity = EventAcquired, l.owner, l.token, l.Validity()
		}
		c.emit(cfg, e)
	}
	return l, err
}

// attempt takes the lock, retrying if wait is set. It reports how many
// retries it made and whether it waited (EventWaiting was sent).
func (c *Client) attempt(ctx context.Context, key string, cfg *config, wait bool) (l *Lease, retries int, waited bool, err error) {
	_, once := cfg.backoff.(noRetry)
	if wait && !once {
		if c.busy != nil {
			return c.retryThenQueue(ctx, key, cfg)
		}
		if q, ok := c.backend.(driver.Queuer); ok {
			c.emit(cfg, Event{Type: EventWaiting, Key: key})
			l, err := c.acquireQueued(ctx, q, key, cfg)
			return l, 0, true, err
		}
	}
	k := &contender{c: c, key: key, cfg: cfg, owner: newOwner(cfg)}
	if wait {
		l, err = c.waitFor(ctx, k)
	} else if l, err = k.try(ctx); l == nil && err == nil {
		err = k.fail(k.lastErr)
	}
	return l, k.retries(), k.waited, err
}

// newOwner returns a fresh owner id: the instance id and 128 random bits;
// or the id fixed with WithOwner.
func newOwner(cfg *config) string {
	if cfg.owner != "" {
		return cfg.owner
	}
	return cfg.instanceID + "/" + rand.Text()
}

// abandon cleans up after an attempt whose outcome is unknown: the lock
// may have been taken. The owner-checked release runs detached, and the
// next attempt takes a new owner id, so that the release cannot meet its
// grant. A fixed owner id (WithOwner) cannot be renewed that way: its
// lock, if taken, is left to expire after its TTL.
func (c *Client) abandon(cfg *config, key, owner string) {
	if cfg.owner == "" {
		c.giveBack(key, owner, cfg.ttl, false)
	}
}

func (c *Client) wrap(op, key string, err error) error {
	return &LockError{Op: op, Key: key, Backend: c.name, Err: err}
}

// Close stops the watchdog — held leases are no longer renewed and their
// contexts are cancelled with ErrClosed — ends every wait of the Client's
// calls with ErrClosed, and closes the backend if the Client opened it
// (Open). Locks still held in the store expire after their TTL (and the
// lock delay, WithLockDelay: Close is no clean release); release them
// before Close to free them at once. Releases the Client makes in
// the background (of locks that calls gave up on) get closeGrace to
// finish; after that they are abandoned, and those locks expire too.
func (c *Client) Close() error {
	if c == nil {
		return ErrNilClient
	}
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.end(ErrClosed)
	c.wd.close()
	c.bg.close(closeGrace)
	if c.ownsBackend {
		if cl, ok := c.backend.(io.Closer); ok {
			return cl.Close()
		}
	}
	return nil
}

package turnstile

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// epoch anchors the monotonic readings the watchdog works with, so that a
// deadline fits in an int64 and wall-clock jumps cannot move it.
var epoch = time.Now()

// mono is a monotonic instant: nanoseconds since epoch.
type mono int64

func now() mono { return mono(time.Since(epoch)) }

func (m mono) add(d time.Duration) mono { return m + mono(d) }

// Lease is a held lock. Its identity (key, token, owner) never changes; its
// validity moves forward with every confirmed renewal. Methods are safe for
// concurrent use; Extend and Release run one at a time.
type Lease struct {
	c      *Client
	cfg    *config
	key    string
	owner  string
	token  uint64
	ctx    context.Context
	cancel context.CancelCauseFunc
	op     chan struct{} // the one operation on the store under owner (lifecycle.go)

	// Guarded by c.wd.mu.
	ttl        time.Duration
	drift      time.Duration
	renewEvery time.Duration // 0: no watchdog, only the local deadline
	deadline   mono          // after it the lease is treated as lost
	due        mono          // next watchdog action
	index      int           // position in the watchdog heap, -1 when out
	inflight   bool          // a renewal is on its way to the store
	gen        uint64        // bumped by Extend, so stale renewals are ignored
	renewErr   error         // why the last renewal failed, if it did
	state      leaseState
}

// errBornExpired: a lock was granted too late to be used — the round
// trip or the handoff ate its whole validity. It never reaches a caller.
var errBornExpired = errors.New("turnstile: lease expired before it was granted")

// newLease registers a freshly acquired lock with the watchdog. It
// returns nil and why not if the lease is past its deadline already
// (errBornExpired) or the Client is closed (ErrClosed); the lock is then
// given back, unless its owner id is fixed (WithOwner).
func (c *Client) newLease(ctx context.Context, key, owner string, token uint64, sent mono, cfg *config) (*Lease, error) {
	l := &Lease{c: c, cfg: cfg, key: key, owner: owner, token: token, ttl: cfg.ttl, drift: cfg.drift(cfg.ttl), index: -1,
		op: make(chan struct{}, 1)}
	if cfg.watchdog {
		l.renewEvery = cfg.renewInterval(cfg.ttl)
	}
	l.deadline = sent.add(l.ttl - l.drift)
	err := errBornExpired
	if now() < l.deadline {
		l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
		if c.wd.add(l, sent) {
			return l, nil
		}
		err = ErrClosed
	}
	if cfg.owner == "" {
		c.giveBack(key, owner, cfg.ttl, false)
	}
	return nil, err
}

// Key returns the locked key.
func (l *Lease) Key() string { return l.key }

// Token returns the fencing token: strictly greater than the token of every
// earlier lease on the same key. Pass it to the storage you write to, and
// let it refuse writes with a token not greater than the last it saw.
func (l *Lease) Token() uint64 { return l.token }

// Owner returns the owner id the lock is held under in the store: the
// Client's instance id, a '/', and 128 random bits.
func (l *Lease) Owner() string { return l.owner }

// Context returns a context that is cancelled when the lease ends. Its
// cause (context.Cause) matches ErrLockLost if the lease was lost,
// ErrReleased after Release, or ErrClosed after Client.Close.
func (l *Lease) Context() context.Context { return l.ctx }

// Validity returns how long the lease is certainly still held: the TTL
// from the last confirmed acquisition or renewal, minus elapsed time and
// clock drift. It is zero once the lease has ended.
func (l *Lease) Validity() time.Duration {
	l.c.wd.mu.Lock()
	defer l.c.wd.mu.Unlock()
	if l.state != leaseHeld {
		return 0
	}
	return max(0, time.Duration(l.deadline-now()))
}

// Extend renews the lease for ttl from now, and makes ttl the lease's TTL
// for later renewals. If the lock is no longer held by this lease the
// lease is lost and the error matches ErrNotHeld. After a store error a
// ttl shorter than the lease's becomes its TTL all the same, and its
// validity shrinks to ttl from the call: the request may have reached the
// store, or still reach it, and cut the lock to ttl. After Client.Close
// the error matches ErrClosed.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	if l.c.closed.Load() {
		return l.c.wrap("extend", l.key, ErrClosed)
	}
	if err := l.acquireOp(ctx); err != nil {
		return l.c.wrap("extend", l.key, err)
	}
	defer l.releaseOp()
	wd := l.c.wd
	wd.mu.Lock()
	if l.state != leaseHeld {
		state := l.state
		wd.mu.Unlock()
		if state == leaseClosed {
			return l.c.wrap("extend", l.key, ErrClosed)
		}
		return l.c.wrap("extend", l.key, fmt.Errorf("%w: %w", ErrNotHeld, context.Cause(l.ctx)))
	}
	l.gen++
	gen := l.gen
	wd.mu.Unlock()

	sent := now()
	ok, err := l.c.backend.Extend(ctx, l.key, l.owner, l.cfg.storeTTL(ttl))
	if err != nil {
		// The store may have taken it: a shorter TTL may be the lock's
		// now, or later, whenever the request arrives.
		wd.extendUnknown(l, sent, ttl)
		return l.c.wrap("extend", l.key, l.c.closedErr(err))
	}
	if !ok {
		wd.lose(l, fmt.Errorf("%w: extend refused, the key is no longer held by this owner", ErrLockLost), false)
		return l.c.wrap("extend", l.key, ErrNotHeld)
	}
	if wd.extended(l, gen, sent, ttl) {
		l.c.emit(l.cfg, Event{Type: EventExtended, Key: l.key, Owner: l.owner, Token: l.token, Validity: l.Validity()})
	}
	return nil
}

// Release frees the lock and stops renewing it. Its context is cancelled
// with ErrReleased. If the lock was no longer held by this lease — it
// expired, perhaps another owner took it, or it was released already — the
// error matches ErrNotHeld and nothing is removed from the store. After a
// store error the lock is no longer renewed and expires after its TTL;
// Release may be called again, and then asks the store. After
// Client.Close the error matches ErrClosed and nothing is removed from
// the store: the lock expires after its TTL. A Release called while
// another Release or an Extend of the lease is on its way waits for it
// (until ctx is done).
func (l *Lease) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	if l.c.closed.Load() {
		// Close stopped renewing the lease, and may have closed the
		// backend: the lock expires after its TTL.
		return l.c.wrap("release", l.key, ErrClosed)
	}
	if err := l.acquireOp(ctx); err != nil {
		return l.c.wrap("release", l.key, err)
	}
	defer l.releaseOp()
	wd := l.c.wd
	start, err := wd.beginRelease(l)
	if err != nil {
		return l.c.wrap("release", l.key, err)
	}
	if start.report {
		l.cancel(ErrReleased)
	}
	if start.mayHand && l.c.handOver(l, start) {
		wd.handed(l)
		l.c.emit(l.cfg, Event{Type: EventReleased, Key: l.key, Owner: l.owner, Token: l.token})
		return nil
	}
	ok, tried, serr := l.c.releaseInStore(ctx, l)
	wd.endRelease(l, serr)
	// The end of a run of handoffs is when waiters of other processes
	// get their turn: if they were told, the next waiter here races them.
	l.c.leaseEnded(l, serr == nil && tried && l.c.endsRun(l))
	switch {
	case serr != nil:
		err = l.c.wrap("release", l.key, l.c.closedErr(serr))
	case !ok:
		err = l.c.wrap("release", l.key, ErrNotHeld)
	}
	if start.report {
		l.c.emit(l.cfg, Event{Type: EventReleased, Key: l.key, Owner: l.owner, Token: l.token, Refused: serr == nil && !ok, Err: err})
	}
	return err
}

// closedErr is err, marked as ErrClosed if the Client was closed while the
// call was on its way: the backend's own error for a closed connection
// differs from one store to the next.
func (c *Client) closedErr(err error) error {
	if c.closed.Load() && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// lost reports whether the lease ended by loss (not by release).
func (l *Lease) lost() bool {
	return errors.Is(context.Cause(l.ctx), ErrLockLost)
}

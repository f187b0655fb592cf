package turnstile

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Leader election with fencing terms.
//
// An Election is a lock on one key, held for as long as a process leads.
// The leader's term is the fencing token of the lease that made it leader,
// so terms increase strictly from one leader to the next on every store,
// and storage that checks them refuses a deposed leader's late writes as
// it refuses a lost lease's. Candidates wait the way Acquire waits
// (release notices, the Client's local line, a store's own queue), not by
// polling on a timer of their own. The leader's value travels in the owner
// id the lock is held under — "<value>/<128 random bits>", the value taking
// the place of the instance id — so every store that can say who holds a
// lock (driver.Inspector) can say who leads and what it announced, with no
// second record that could disagree with the lock.

// MaxLeaderValueLen is the longest value a candidate may announce, in
// bytes. The value is part of the owner id the store keeps, and every
// store keeps owner ids of at least 255 bytes.
const MaxLeaderValueLen = 128

// DefaultObserveInterval is how often Observe asks the store who leads
// when nothing told it of a change.
const DefaultObserveInterval = time.Second

// Election is a leader election on one key of a Client's store. Make one
// with Client.Election; it is safe for concurrent use, and any number of
// processes may campaign in elections of the same name.
type Election struct {
	c    *Client
	name string
	opts []Option // for every Campaign: the caller's, then the Backoff made to wait forever
	cfg  config   // the Client's settings with opts applied
}

// Leadership is won by Campaign and held until Resign, the loss of its
// lease, or Client.Close.
type Leadership struct {
	e     *Election
	lease *Lease
	value string
}

// Leader is who leads an election, as the store reports it.
type Leader struct {
	// Elected reports whether someone leads. When it is false, the other
	// fields are empty.
	Elected bool
	// Value is what the leader announced with Campaign.
	Value string
	// Term is the leader's fencing token: greater than the term of every
	// earlier leader of the election (zero if the store cannot tell).
	Term uint64
	// Owner is the owner id the leader holds the election's lock under.
	Owner string
}

// String describes l for logs: "value (term 42)" or "no leader".
func (l Leader) String() string {
	if !l.Elected {
		return "no leader"
	}
	return fmt.Sprintf("%s (term %d)", l.Value, l.Term)
}

// Election returns the election called name: the lock on key name, held
// by the leader. opts apply to every Campaign of it (WithTTL: how long a
// leader that crashed keeps leading; WithBackoff: how candidates wait,
// with no limit on the number of retries). An option that makes no sense
// for leadership is refused with ErrInvalidOption: WithOwner (the owner id
// carries the leader's value) and a backend whose lock several owners may
// hold at once (a semaphore, read locks).
func (c *Client) Election(name string, opts ...Option) (*Election, error) {
	if c == nil {
		return nil, ErrNilClient
	}
	if err := checkKey(name); err != nil {
		return nil, err
	}
	cfg := c.cfg
	cfg.perCall = true
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if cfg.owner != "" {
		return nil, fmt.Errorf("%w: WithOwner cannot be given to an election: the owner id carries the leader's value", ErrInvalidOption)
	}
	if c.shared {
		return nil, fmt.Errorf("%w: an election needs an exclusive lock; %s may have several holders", ErrInvalidOption, c.name)
	}
	// The Backoff in force (the caller's or the Client's), made to wait
	// as long as it takes.
	e := &Election{c: c, name: name, cfg: cfg}
	e.opts = append(append(e.opts, opts...), WithBackoff(forever(cfg.backoff)))
	return e, nil
}

// forever returns b without a limit on its retries: Exponential and
// Constant with MaxRetries -1; any other Backoff (NoRetry included)
// goes on, once it gives up, with the default exponential delays.
func forever(b Backoff) Backoff {
	switch b := b.(type) {
	case Exponential:
		b.MaxRetries = -1
		return b
	case Constant:
		b.MaxRetries = -1
		return b
	}
	return untiring{b}
}

// untiring is a Backoff that never gives up: b's delays while it has
// them, then the default exponential ones.
type untiring struct{ b Backoff }

// Delay implements Backoff.
func (u untiring) Delay(attempt int) (time.Duration, bool) {
	if d, ok := u.b.Delay(attempt); ok {
		return d, true
	}
	return Exponential{Base: DefaultBackoffBase, Cap: DefaultBackoffCap, MaxRetries: -1}.Delay(attempt)
}

// Name returns the election's name: the key of its lock.
func (e *Election) Name() string { return e.name }

// Campaign waits until this candidate leads the election and returns its
// Leadership. value is what observers see (Leader.Value): an address, a
// host name; empty means the Client's instance id (host name and process
// id by default). It must be at most MaxLeaderValueLen bytes without
// control characters.
//
// Campaign waits as long as it takes: until leadership is won, ctx is
// done (an error matching ctx.Err()), the store refuses the user
// (ErrPermission) or the Client is closed (ErrClosed); other store errors
// are retried as Acquire retries them. A Campaign ended
// by its context leaves nothing behind: a lock taken as the context ended
// is released before Campaign returns, and a candidate's place in a
// store's queue is left.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	return e.campaign(ctx, value, true)
}

// TryCampaign makes one attempt to lead the election. It returns an error
// matching ErrNotAcquired when someone else leads. value is as for
// Campaign: empty announces the Client's instance id. (The command line
// refuses an explicit empty --value instead, as a value lost from a shell
// variable; omitting --value announces the instance id there too.)
func (e *Election) TryCampaign(ctx context.Context, value string) (*Leadership, error) {
	return e.campaign(ctx, value, false)
}

func (e *Election) campaign(ctx context.Context, value string, wait bool) (*Leadership, error) {
	if e == nil || e.c == nil {
		return nil, ErrNilClient
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	if value == "" {
		value = e.c.cfg.instanceID
	}
	if err := checkLeaderValue(value); err != nil {
		return nil, err
	}
	for {
		l, err := e.c.acquire(ctx, e.name, e.opts, wait, value)
		if err == nil && ctx.Err() != nil {
			// Won as the caller gave up: step down, leave no leader
			// behind that nobody will renew or resign.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			_ = l.Release(rctx)
			cancel()
			return nil, e.c.wrap("acquire", e.name, context.Cause(ctx))
		}
		if err == nil {
			return &Leadership{e: e, lease: l, value: value}, nil
		}
		if !wait || !errors.Is(err, ErrNotAcquired) || ctx.Err() != nil {
			return nil, err
		}
		// The wait ended without the lock although the Backoff never
		// gives up (a bounded wait in a store's queue, say): campaign on,
		// after a pause, so that nothing can make this a busy loop.
		t := time.NewTimer(rand.N(DefaultBackoffCap))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// checkLeaderValue refuses a value that the owner id cannot carry.
func checkLeaderValue(v string) error {
	if len(v) > MaxLeaderValueLen {
		return fmt.Errorf("%w: leader value is %d bytes, longer than %d", ErrInvalidOption, len(v), MaxLeaderValueLen)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] == 0x7f {
			return fmt.Errorf("%w: leader value %q contains a control character", ErrInvalidOption, v)
		}
	}
	return nil
}

// leaderValue is the value a leader announced, read from the owner id
// its lock is held under: the part before the last '/'. An owner id
// without '/' (a lock not taken by a Client) is its own value.
func leaderValue(owner string) string {
	if i := strings.LastIndexByte(owner, '/'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// Term returns the leadership's fencing term: the token of the lease that
// made this candidate leader, greater than every earlier leader's term.
// Pass it to the storage the leader writes to, so that a leader deposed
// while paused cannot write after its successor.
func (l *Leadership) Term() uint64 { return l.lease.Token() }

// Value returns what this leader announced to observers.
func (l *Leadership) Value() string { return l.value }

// Name returns the election's name.
func (l *Leadership) Name() string { return l.e.name }

// Context returns a context that is cancelled the moment leadership ends:
// its cause matches ErrLockLost if the lease was lost (a refused renewal,
// or no confirmed renewal before its local deadline), ErrReleased after
// Resign, ErrClosed after Client.Close. The leader must stop acting as
// leader when it is done.
func (l *Leadership) Context() context.Context { return l.lease.Context() }

// Lease returns the lease that holds the election's lock.
func (l *Leadership) Lease() *Lease { return l.lease }

// Resign steps down at once: the election's lock is released, so the next
// candidate is elected without waiting for the TTL (candidates waiting on
// release notices or in a store's queue retry straight away), and the
// leadership's context is cancelled with ErrReleased. If leadership was
// lost already the error matches ErrNotHeld.
func (l *Leadership) Resign(ctx context.Context) error {
	return l.lease.Release(ctx)
}

// Leader returns who leads the election now, as the store reports it. It
// needs a store that can say who holds a lock (driver.Inspector: every
// store turnstile ships); others give an error matching ErrUnsupported.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if e == nil || e.c == nil {
		return Leader{}, ErrNilClient
	}
	st, err := e.c.Inspect(ctx, e.name)
	if err != nil {
		return Leader{}, err
	}
	return leaderOf(st), nil
}

// leaderOf reads a lock's state as an election's leader.
func leaderOf(st LockState) Leader {
	if !st.Held || len(st.Holders) == 0 {
		return Leader{}
	}
	h := st.Holders[0]
	term := h.Token
	if term == 0 {
		term = st.Token
	}
	return Leader{Elected: true, Value: leaderValue(h.Owner), Term: term, Owner: h.Owner}
}

// Observe reports who leads the election: first who leads now, then each
// change — a new leader (always with a greater term than the leaders
// before it: a store's answer that is older than one already reported is
// dropped) or no leader — as the iteration asks for them. Every report
// of a leader has a greater term than the report of a leader before it.
// The same leader is reported again if the store later reports a greater
// term for it: a store may show a new leader before its term is final
// (ZooKeeper shows a candidate that waited in its queue before the write
// that grants it the lock, whose zxid is the term), or report the
// largest token of the members that answered (Redlock); Leader, asked
// after Campaign returned, reports the term Campaign returned (Redlock: no
// smaller). It learns of
// changes from the store's release notices (driver.Notifier) where it
// sends them, looking again shortly after each, and otherwise by asking
// the store every interval (0: DefaultObserveInterval), so a change may
// be seen up to one interval late, and a leader that came and went
// within one may not be seen at all.
//
// A store error is yielded with a zero Leader, and the iteration goes on
// (asking again after the interval) until the caller stops it or ctx is
// done; ErrClosed, ErrUnsupported and ErrPermission, which asking again
// cannot cure, end it after being yielded. It ends without an error when
// ctx is done.
func (e *Election) Observe(ctx context.Context, interval time.Duration) iter.Seq2[Leader, error] {
	return func(yield func(Leader, error) bool) {
		if e == nil || e.c == nil {
			yield(Leader{}, ErrNilClient)
			return
		}
		if ctx == nil {
			yield(Leader{}, fmt.Errorf("%w: nil context", ErrInvalidOption))
			return
		}
		if interval < 0 {
			yield(Leader{}, fmt.Errorf("%w: observe interval %v must not be negative", ErrInvalidOption, interval))
			return
		}
		if interval == 0 {
			interval = DefaultObserveInterval
		}
		e.observe(ctx, interval, yield)
	}
}

func (e *Election) observe(ctx context.Context, interval time.Duration, yield func(Leader, error) bool) {
	var notices <-chan struct{}
	if n, ok := e.c.backend.(driver.Notifier); ok && e.cfg.notify {
		ch, stop, err := n.Released(ctx, e.name)
		if err == nil {
			defer stop()
			notices = ch
		}
	}
	// After a notice or a change, a successor is on its way: look again
	// soon, then less and less often, up to the interval.
	base := min(DefaultBackoffBase, interval)
	soon := time.Duration(0)

	var last Leader
	var top Leader // the leader reported with the highest term
	reported := false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-notices:
			if !ok {
				notices = nil // the subscription ended: ask every interval
			}
			soon = base
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
		if ctx.Err() != nil {
			return
		}
		st, err := e.c.Inspect(ctx, e.name)
		next := interval
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !yield(Leader{}, err) || errors.Is(err, ErrClosed) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrPermission) {
				return
			}
		default:
			cur := leaderOf(st)
			if fresh(last, cur, top, reported) {
				if !yield(cur, nil) {
					return
				}
				last, reported = cur, true
				if cur.Elected && cur.Term >= top.Term {
					top = cur
				}
				soon = base
			}
			if soon > 0 && soon < interval {
				next = soon
				soon *= 2
			} else {
				soon = 0
			}
		}
		// Jitter keeps many observers started together from asking in
		// step.
		timer.Reset(next - time.Duration(rand.Int64N(int64(next)/10+1)))
	}
}

// fresh says whether cur is news to an observer that last reported
// last, top being the leader it reported with the highest term: a change
// of leader that is not older than what it reported, or a greater term
// for the same leader. A leader is known by its owner id, which is new
// for every lease. Another leader with a term below top's, or with top's
// itself, can only come from an answer older than one reported already,
// and is dropped — except top itself after a report of no leader: its
// owner id is its lease's alone, so it still leads and the answer of no
// leader missed it (a Redlock whose node did not answer an Inspect), or
// the answer is old and the next look corrects it. A store that cannot
// tell terms (zero) is followed by owner alone.
func fresh(last, cur, top Leader, reported bool) bool {
	switch {
	case !reported:
		return true
	case !cur.Elected:
		return last.Elected
	case last.Elected && cur.Owner == last.Owner:
		// Owner ids are new per lease: the same leader, news only if
		// the store now reports a greater term for it.
		return cur.Term > last.Term
	case !last.Elected && top.Elected && cur.Owner == top.Owner:
		return cur.Term >= top.Term
	}
	return cur.Term == 0 || cur.Term > top.Term
}

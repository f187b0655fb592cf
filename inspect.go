package turnstile

import (
	"context"
	"fmt"

	"github.com/turnstilelock/turnstile/driver"
)

// LockState is what the store knows about one key's lock: whether it is
// held, by whom (Holders: owner id, fencing token, time left), the last
// token the store issued for the key, and how many owners wait in the
// store's queue (-1 where the store keeps no queue it can count).
type LockState = driver.LockState

// Holder is one owner of a lock, as LockState lists it.
type Holder = driver.Holder

// DefaultListLimit is the number of states List returns when asked for
// none in particular (the CLI's "turnstile ls" uses it).
const DefaultListLimit = 1000

// Inspect returns key's state in the store, without changing anything. A
// key nobody holds is not an error: Held is false. A backend that cannot
// tell gives an error matching ErrUnsupported.
func (c *Client) Inspect(ctx context.Context, key string) (LockState, error) {
	in, err := c.inspector(ctx, "inspect", key)
	if err != nil {
		return LockState{}, err
	}
	st, err := in.Inspect(ctx, key)
	if err != nil {
		return LockState{}, c.wrap("inspect", key, c.closedErr(err))
	}
	st.Key = key
	return st, nil
}

// List returns the states of the locks held now whose keys start with
// prefix ("" for every key), at most limit of them, in no particular
// order, and whether more remain. How much of the store it reads to find
// them depends on the backend (each documents its scan); it never
// changes anything.
func (c *Client) List(ctx context.Context, prefix string, limit int) (states []LockState, more bool, err error) {
	if c == nil {
		return nil, false, ErrNilClient
	}
	if ctx == nil {
		return nil, false, fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	if len(prefix) > MaxKeyLen {
		return nil, false, fmt.Errorf("%w: prefix is %d bytes, longer than %d", ErrInvalidKey, len(prefix), MaxKeyLen)
	}
	if limit <= 0 {
		return nil, false, fmt.Errorf("%w: list limit %d must be positive", ErrInvalidOption, limit)
	}
	if c.closed.Load() {
		return nil, false, c.wrap("list", prefix, ErrClosed)
	}
	in, ok := c.backend.(driver.Inspector)
	if !ok {
		return nil, false, c.wrap("list", prefix, c.unsupported("listing locks", "driver.Inspector"))
	}
	states, more, err = in.List(ctx, prefix, limit)
	if err != nil {
		return nil, false, c.wrap("list", prefix, c.closedErr(err))
	}
	if len(states) > limit {
		states, more = states[:limit], true
	}
	return states, more, nil
}

// ForceRelease removes key's lock whoever holds it, as an operator does
// with a stuck lock, and returns the state it removed (Held is false if
// nobody held the lock: then nothing was removed). Before the lock goes,
// the store makes every later token for key greater than every token it
// issued so far, so that fenced storage refuses the removed holder's late
// writes once the next holder has written. The removed holder learns it at
// its next renewal: its lease is lost (ErrLockLost). Waiters are told as
// on a release.
//
// It is logged at Warn level through the Client's logger (key, removed
// owner, token) and reported to the Client's observers as
// EventForceReleased. A backend that cannot do it gives an error matching
// ErrUnsupported.
func (c *Client) ForceRelease(ctx context.Context, key string) (LockState, error) {
	if err := c.checkCall(ctx, "force release", key); err != nil {
		return LockState{}, err
	}
	fr, ok := c.backend.(driver.ForceReleaser)
	if !ok {
		return LockState{}, c.wrap("force release", key, c.unsupported("forced release", "driver.ForceReleaser"))
	}
	st, err := fr.ForceRelease(ctx, key)
	if err != nil {
		err = c.wrap("force release", key, c.closedErr(err))
		c.cfg.logger.Warn("turnstile: forced release failed", "key", key, "backend", c.name, "err", err)
		return LockState{}, err
	}
	st.Key = key
	if !st.Held {
		c.cfg.logger.Info("turnstile: forced release found the lock free", "key", key, "backend", c.name, "last_token", st.Token)
		return st, nil
	}
	for _, h := range st.Holders {
		c.cfg.logger.Warn("turnstile: lock force-released", "key", key, "owner", h.Owner, "token", h.Token, "fence_floor", st.Token, "backend", c.name)
		c.emit(&c.cfg, Event{Type: EventForceReleased, Key: key, Owner: h.Owner, Token: max(h.Token, st.Token)})
	}
	if len(st.Holders) == 0 { // held, by an owner the store could not name
		c.cfg.logger.Warn("turnstile: lock force-released", "key", key, "backend", c.name)
		c.emit(&c.cfg, Event{Type: EventForceReleased, Key: key, Token: st.Token})
	}
	return st, nil
}

// inspector checks a call on key and returns the backend's Inspector.
func (c *Client) inspector(ctx context.Context, op, key string) (driver.Inspector, error) {
	if err := c.checkCall(ctx, op, key); err != nil {
		return nil, err
	}
	in, ok := c.backend.(driver.Inspector)
	if !ok {
		return nil, c.wrap(op, key, c.unsupported("inspecting locks", "driver.Inspector"))
	}
	return in, nil
}

// checkCall validates the arguments of an operator call on key, as
// Acquire validates its own.
func (c *Client) checkCall(ctx context.Context, op, key string) error {
	if c == nil {
		return ErrNilClient
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if c.closed.Load() {
		return c.wrap(op, key, ErrClosed)
	}
	return nil
}

func (c *Client) unsupported(what, iface string) error {
	return fmt.Errorf("%w: %s needs a %s", ErrUnsupported, what, iface)
}

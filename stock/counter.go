package stock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
)

// Counter is a stock held in one Redis key as an integer. Take is one
// atomic DECRBY; when that leaves the key below zero, the order is sold out
// and Take gives the units back with INCRBY.
//
// Guarantee: the number of units handed out by successful Takes, less the
// units Put back, never exceeds what Set stored. A Take succeeds only if
// its own DECRBY left the key at zero or above, and every DECRBY below zero
// is undone by its INCRBY.
//
// Limits, said plainly:
//   - Between a failed Take's DECRBY and its INCRBY the raw key reads below
//     zero, by the sum of the orders being given back at that instant. Read
//     the stock with Left, which reports such a value as zero; a reader of
//     the raw key must do the same.
//   - Orders of different sizes can refuse each other: while an order for
//     5 is being given back, an order for 1 may see the key at zero and be
//     sold out although a unit is left; so may an order that meets a Put
//     while give-backs are pending. With one size per order (n = 1 for a
//     flash sale) and no Put during the rush, every unit sells: the key
//     only goes below zero once it is truly empty. Sharded has no such
//     window.
//   - If the give-back itself fails (the connection drops between the two
//     commands), the units stay taken: the counter reads n too low until
//     someone Puts them back, and Take says so in its error. It never
//     oversells.
//
// A key that does not exist holds zero units. A Counter is safe for
// concurrent use.
type Counter struct {
	client rueidis.Client
	key    string
}

// NewCounter returns the counter kept in key. The key is used as it is
// (a single key needs no hash tag); the caller keeps owning client.
func NewCounter(client rueidis.Client, key string) (*Counter, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", turnstile.ErrInvalidOption)
	}
	if err := checkKey("stock key", key); err != nil {
		return nil, err
	}
	return &Counter{client: client, key: key}, nil
}

// Set stores n units, replacing whatever the counter held. Calling it while
// orders are running makes them count against the new level.
func (c *Counter) Set(ctx context.Context, n int64) error {
	if err := checkTotal(n); err != nil {
		return err
	}
	cmd := c.client.B().Set().Key(c.key).Value(strconv.FormatInt(n, 10)).Build()
	if err := c.client.Do(ctx, cmd).Error(); err != nil {
		return fmt.Errorf("stock: set %q: %w", c.key, err)
	}
	return nil
}

// Take takes n units and returns how many are left after it. When fewer
// than n were left it takes nothing and returns ErrSoldOut, with left the
// level it read after giving the units back (never below zero).
func (c *Counter) Take(ctx context.Context, n int64) (left int64, err error) {
	if err := checkQuantity(n); err != nil {
		return 0, err
	}
	left, err = c.client.Do(ctx, c.client.B().Decrby().Key(c.key).Decrement(n).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("stock: take %d from %q: %w", n, c.key, err)
	}
	if left >= 0 {
		return left, nil
	}
	// The give-back must run even if the caller gives up now: without it
	// the units would be lost to every later order.
	back := context.WithoutCancel(ctx)
	after, err := c.client.Do(back, c.client.B().Incrby().Key(c.key).Increment(n).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("%w: %q had fewer than %d units; giving them back failed, so it reads %d too low until they are Put back: %w",
			ErrSoldOut, c.key, n, n, err)
	}
	return max(after, 0), fmt.Errorf("%w: %q had fewer than %d units", ErrSoldOut, c.key, n)
}

// Put gives n units back (a cancelled order) and returns the level after
// it.
func (c *Counter) Put(ctx context.Context, n int64) (left int64, err error) {
	if err := checkQuantity(n); err != nil {
		return 0, err
	}
	left, err = c.client.Do(ctx, c.client.B().Incrby().Key(c.key).Increment(n).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("stock: put %d into %q: %w", n, c.key, err)
	}
	return max(left, 0), nil
}

// Left returns how many units are left: the key's value, or zero while it
// reads below zero during a give-back (or when it does not exist).
func (c *Counter) Left(ctx context.Context) (int64, error) {
	n, err := c.client.Do(ctx, c.client.B().Get().Key(c.key).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stock: read %q: %w", c.key, err)
	}
	return max(n, 0), nil
}

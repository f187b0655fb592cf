//go:build unix

package demo

// The shop of the flash sale: the checkout code of each variant, run alike
// by the demo process and by its workers.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/stock"
)

// flashShop is one process's view of the sale: the code of one variant.
type flashShop struct {
	p       flashParams
	env     *environment
	client  *turnstile.Client // lock
	counter *stock.Counter    // atomic-decr
	sharded *stock.Sharded    // sharded
	cas     *stock.CAS        // cas
}

func newFlashShop(env *environment, p flashParams, opts ...turnstile.Option) (*flashShop, error) {
	s := &flashShop{p: p, env: env}
	var err error
	switch p.Variant {
	case "lock":
		s.client, err = env.newClient(opts...)
	case "atomic-decr":
		s.counter, err = stock.NewCounter(env.rc, "demo:flash:{"+p.Item+"}:counter")
	case "sharded":
		s.sharded, err = stock.NewSharded(env.rc, "demo:flash:"+p.Item+":sharded", flashShards)
	case "cas":
		s.cas, err = stock.NewCAS(env.pool)
	}
	return s, err
}

func (s *flashShop) Close() {
	if s.client != nil {
		_ = s.client.Close()
	}
}

func (s *flashShop) redisKey() string { return "demo:flash:{" + s.p.Item + "}:stock" }

// reset puts the units on sale.
func (s *flashShop) reset(ctx context.Context) error {
	switch s.p.Variant {
	case "atomic-decr":
		return s.counter.Set(ctx, s.p.Units)
	case "sharded":
		return s.sharded.Set(ctx, s.p.Units)
	case "cas":
		if err := stock.Migrate(ctx, s.env.pool); err != nil {
			return err
		}
		return s.cas.Set(ctx, s.p.Item, s.p.Units)
	}
	if s.p.Store == "postgres" {
		_, err := s.env.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS turnstile_demo_stock (item text PRIMARY KEY, stock bigint NOT NULL)`)
		if err == nil {
			_, err = s.env.pool.Exec(ctx, `INSERT INTO turnstile_demo_stock (item, stock) VALUES ($1, $2)
				ON CONFLICT (item) DO UPDATE SET stock = EXCLUDED.stock`, s.p.Item, s.p.Units)
		}
		return err
	}
	return s.env.rc.Do(ctx, s.env.rc.B().Set().Key(s.redisKey()).Value(strconv.FormatInt(s.p.Units, 10)).Build()).Error()
}

// left reads the stock as the variant keeps it.
func (s *flashShop) left(ctx context.Context) (int64, error) {
	switch s.p.Variant {
	case "atomic-decr":
		return s.counter.Left(ctx)
	case "sharded":
		return s.sharded.Left(ctx)
	case "cas":
		return s.cas.Left(ctx, s.p.Item)
	}
	if s.p.Store == "postgres" {
		var n int64
		err := s.env.pool.QueryRow(ctx, `SELECT stock FROM turnstile_demo_stock WHERE item = $1`, s.p.Item).Scan(&n)
		return n, err
	}
	return s.env.rc.Do(ctx, s.env.rc.B().Get().Key(s.redisKey()).Build()).AsInt64()
}

// order places one order: it reports whether a unit was sold and the
// stock its write left (when the variant knows it).
func (s *flashShop) order(ctx context.Context, t *flashTally) (sold bool, left int64, known bool, err error) {
	switch s.p.Variant {
	case "naive":
		return s.readCheckWrite(ctx)
	case "lock":
		err = turnstile.Do(ctx, s.client, "lock:inventory:"+s.p.Item, func(ctx context.Context, _ *turnstile.Lease) error {
			var err error
			sold, left, known, err = s.readCheckWrite(ctx)
			return err
		}, turnstile.WithBackoff(flashLockBackoff))
		return sold, left, known, err
	case "atomic-decr":
		left, err = s.counter.Take(ctx, 1)
		if errors.Is(err, stock.ErrSoldOut) {
			return false, 0, false, nil
		}
		return err == nil, left, err == nil, err
	case "sharded":
		_, err = s.sharded.Take(ctx, 1)
		if errors.Is(err, stock.ErrSoldOut) {
			return false, 0, false, nil
		}
		return err == nil, 0, false, err
	case "cas":
		for {
			left, err = s.cas.Take(ctx, s.p.Item, 1)
			switch {
			case errors.Is(err, stock.ErrSoldOut):
				return false, 0, false, nil
			case errors.Is(err, stock.ErrConflict) && ctx.Err() == nil:
				// Lost every retry to other orders: the shop submits the
				// order again, as a customer pressing "buy" again would.
				t.mu.Lock()
				t.Resubmits++
				t.mu.Unlock()
				continue
			}
			return err == nil, left, err == nil, err
		}
	}
	return false, 0, false, fmt.Errorf("unknown variant %q", s.p.Variant)
}

// readCheckWrite is the checkout code of the incident: read the stock,
// check it, and write the decrement in a separate statement.
func (s *flashShop) readCheckWrite(ctx context.Context) (sold bool, left int64, known bool, err error) {
	var n int64
	if s.p.Store == "postgres" {
		err = s.env.pool.QueryRow(ctx, `SELECT stock FROM turnstile_demo_stock WHERE item = $1`, s.p.Item).Scan(&n)
	} else {
		n, err = s.env.rc.Do(ctx, s.env.rc.B().Get().Key(s.redisKey()).Build()).AsInt64()
	}
	if err != nil || n <= 0 {
		return false, 0, false, err
	}
	if err := sleepCtx(ctx, flashGap); err != nil {
		return false, 0, false, err
	}
	if s.p.Store == "postgres" {
		err = s.env.pool.QueryRow(ctx, `UPDATE turnstile_demo_stock SET stock = stock - 1 WHERE item = $1 RETURNING stock`, s.p.Item).Scan(&left)
	} else {
		left, err = s.env.rc.Do(ctx, s.env.rc.B().Decr().Key(s.redisKey()).Build()).AsInt64()
	}
	return err == nil, left, err == nil, err
}

// run places n orders at once, one goroutine each, as a burst of
// requests would arrive.
func (s *flashShop) run(ctx context.Context, n int, t *flashTally) {
	t.MinLeft = s.p.Units
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			defer t.done.Add(1)
			sold, left, known, err := s.order(ctx, t)
			t.mu.Lock()
			defer t.mu.Unlock()
			switch {
			case err != nil:
				countFailure(&t.Failed, &t.FirstErr, err)
			case sold:
				t.Sold++
			default:
				t.SoldOut++
			}
			if known {
				t.MinLeft = min(t.MinLeft, left)
			}
		})
	}
	wg.Wait()
}

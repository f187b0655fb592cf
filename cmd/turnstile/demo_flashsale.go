//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/stock"
)

// The flash sale of SPEC S-0.1.
const (
	defaultFlashUnits  = 1000
	defaultFlashOrders = 3847
	maxFlashOrders     = 20000 // one goroutine per order
	flashWorkers       = 3     // worker processes; the demo process takes a share too
	flashShards        = 8
	// flashGap is the time an order spends between reading the stock and
	// writing it back (validating the cart, pricing): the window in which
	// the naive code lets other orders read the same stock.
	flashGap = 2 * time.Millisecond
)

// flashLockBackoff lets the orders queued on the item's lock wait as long
// as the sale lasts, retrying often: an order turned away for a busy lock
// would be a lost sale, not a protected one.
var flashLockBackoff = turnstile.Exponential{Base: time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: -1}

// flashParams is what every process of one variant needs to know.
type flashParams struct {
	Variant string `json:"variant"`
	Item    string `json:"item"`
	Units   int64  `json:"units"`  // on sale
	Orders  int    `json:"orders"` // placed by this process
	Store   string `json:"store"`  // where naive and lock keep the stock: postgres or redis
}

// flashTally is what one process's orders came to.
type flashTally struct {
	Sold      int64  `json:"sold"`
	SoldOut   int64  `json:"sold_out"`
	Failed    int64  `json:"failed"`
	Resubmits int64  `json:"resubmits"`
	MinLeft   int64  `json:"min_left"` // lowest stock an order saw after its write
	FirstErr  string `json:"first_error,omitempty"`
	mu        sync.Mutex
	done      atomic.Int64
}

func (t *flashTally) merge(o *flashTally) {
	t.Sold += o.Sold
	t.SoldOut += o.SoldOut
	t.Failed += o.Failed
	t.Resubmits += o.Resubmits
	t.MinLeft = min(t.MinLeft, o.MinLeft)
	if t.FirstErr == "" {
		t.FirstErr = o.FirstErr
	}
}

// flashShop is one process's view of the sale: the code of one variant.
type flashShop struct {
	p       flashParams
	env     *demoEnv
	client  *turnstile.Client // lock
	counter *stock.Counter    // atomic-decr
	sharded *stock.Sharded    // sharded
	cas     *stock.CAS        // cas
}

func newFlashShop(env *demoEnv, p flashParams, opts ...turnstile.Option) (*flashShop, error) {
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
				t.Failed++
				if t.FirstErr == "" {
					t.FirstErr = err.Error()
				}
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

// flashSaleWorker is a worker process's share of the orders.
func flashSaleWorker(ctx context.Context, env *demoEnv, spec workerSpec, w *workerLink) (any, error) {
	var p flashParams
	if err := json.Unmarshal(spec.Params, &p); err != nil {
		return nil, err
	}
	s, err := newFlashShop(env, p)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := w.ready(ctx); err != nil {
		return nil, err
	}
	t := &flashTally{}
	stop := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				w.progress(t.done.Load())
			}
		}
	}()
	s.run(ctx, p.Orders, t)
	close(stop)
	<-reported
	return t, ctx.Err()
}

// runFlashSale runs every variant of the flash sale.
func runFlashSale(ctx context.Context, env *demoEnv) ([]demoResult, error) {
	variants := []string{"naive", "lock", "atomic-decr", "sharded"}
	if env.pool != nil {
		variants = append(variants, "cas")
	} else {
		env.progress("flash-sale: cas needs PostgreSQL, which this run has not: skipped")
	}
	var rs []demoResult
	for _, v := range variants {
		r, err := runFlashVariant(ctx, env, v)
		if err != nil {
			return rs, fmt.Errorf("%s: %w", v, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func runFlashVariant(ctx context.Context, env *demoEnv, variant string) (demoResult, error) {
	units, orders := env.flashUnits, env.flashOrders
	p := flashParams{Variant: variant, Item: "12345-" + variant, Units: units, Store: env.store()}
	share := orders / (flashWorkers + 1)
	s, err := newFlashShop(env, p)
	if err != nil {
		return demoResult{}, err
	}
	defer s.Close()
	if err := s.reset(ctx); err != nil {
		return demoResult{}, fmt.Errorf("put %d units on sale: %w", units, err)
	}
	specs := make([]workerSpec, flashWorkers)
	for i := range specs {
		p.Orders = share
		raw, _ := json.Marshal(p)
		specs[i] = workerSpec{Scenario: "flash-sale", Variant: variant, Params: raw}
	}
	own := orders - share*flashWorkers
	env.progress("flash-sale %s: %s orders for %s units from %d worker processes and this one...", variant, num(orders), num(units), flashWorkers)
	g, err := startWorkers(ctx, env, specs)
	if err != nil {
		return demoResult{}, err
	}
	defer g.Close()

	mine := &flashTally{}
	sampled := sampleMin(ctx, s)
	stopProgress := env.showProgress("flash-sale "+variant, int64(orders), func() int64 { return g.progress() + mine.done.Load() })
	start := time.Now()
	g.goAll()
	s.run(ctx, own, mine)
	tallies := make([]flashTally, flashWorkers)
	ptrs := make([]any, flashWorkers)
	for i := range tallies {
		ptrs[i] = &tallies[i]
	}
	err = g.wait(ctx, ptrs...)
	elapsed := time.Since(start)
	stopProgress()
	lowest := sampled()
	if err != nil {
		return demoResult{}, err
	}
	total := &flashTally{MinLeft: mine.MinLeft}
	total.merge(mine)
	for i := range tallies {
		total.merge(&tallies[i])
	}
	final, err := s.left(ctx)
	if err != nil {
		return demoResult{}, fmt.Errorf("read the stock: %w", err)
	}
	total.MinLeft = min(total.MinLeft, lowest, final)

	r := demoResult{Variant: variant, Naive: variant == "naive"}
	r.OK = total.Sold == units && final == 0 && total.MinLeft >= 0 && total.Failed == 0
	rate := float64(orders) / elapsed.Seconds()
	switch {
	case total.Sold > units:
		r.Summary = fmt.Sprintf("oversold by %s: %s sold of %s units, stock %s (lowest %s)",
			num(total.Sold-units), num(total.Sold), num(units), num(final), num(total.MinLeft))
	case r.OK:
		r.Summary = fmt.Sprintf("exactly %s sold, %s sold out, stock %s (lowest %s)", num(total.Sold), num(total.SoldOut), num(final), num(total.MinLeft))
	default:
		r.Summary = fmt.Sprintf("%s sold, %s sold out, %s failed, stock %s (lowest %s)", num(total.Sold), num(total.SoldOut), num(total.Failed), num(final), num(total.MinLeft))
	}
	r.Summary += fmt.Sprintf(", %s orders/s", num(int64(rate)))
	if variant == "cas" {
		r.Summary += fmt.Sprintf(", %s orders resubmitted after conflicts", num(total.Resubmits))
	}
	if total.FirstErr != "" {
		r.Summary += "; first error: " + total.FirstErr
	}
	store := "redis"
	if variant == "naive" || variant == "lock" || variant == "cas" {
		store = p.Store
		if variant == "cas" {
			store = "postgres"
		}
	}
	r.add("store", store)
	r.add("processes", flashWorkers+1)
	r.add("units", units)
	r.add("orders", orders)
	r.add("sold", total.Sold)
	r.add("sold_out", total.SoldOut)
	r.add("failed", total.Failed)
	r.add("oversold", max(0, total.Sold-units))
	r.add("final_stock", final)
	r.add("min_stock", total.MinLeft)
	r.add("orders_per_s", int64(rate))
	r.add("seconds", elapsed.Seconds())
	if variant == "cas" {
		r.add("resubmits", total.Resubmits)
	}
	return r, nil
}

// sampleMin reads the stock every few milliseconds while the sale runs;
// the returned function stops it and returns the lowest value read.
func sampleMin(ctx context.Context, s *flashShop) func() int64 {
	ctx, cancel := context.WithCancel(ctx)
	lowest := s.p.Units
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if n, err := s.left(ctx); err == nil {
				lowest = min(lowest, n)
			}
			_ = sleepCtx(ctx, 2*time.Millisecond)
		}
	}()
	return func() int64 { cancel(); <-done; return lowest }
}

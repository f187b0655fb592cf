//go:build unix

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile"
)

// The flash sale: more concurrent orders than units on sale, from
// several processes.
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

// flashSaleWorker is a worker process's share of the orders.
func flashSaleWorker(ctx context.Context, env *environment, spec workerSpec, w *workerLink) (any, error) {
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
	stop := every(200*time.Millisecond, func() { w.progress(t.done.Load()) })
	s.run(ctx, p.Orders, t)
	stop()
	return t, ctx.Err()
}

// runFlashSale runs every variant of the flash sale.
func runFlashSale(ctx context.Context, env *environment) ([]result, error) {
	variants := []string{"naive", "lock", "atomic-decr", "sharded"}
	if env.pool != nil {
		variants = append(variants, "cas")
	} else {
		env.progress("flash-sale: cas needs PostgreSQL, which this run has not: skipped")
	}
	return runVariants(ctx, env, variants, runFlashVariant)
}

func runFlashVariant(ctx context.Context, env *environment, variant string) (result, error) {
	units, orders := env.flashUnits, env.flashOrders
	p := flashParams{Variant: variant, Item: "12345-" + variant, Units: units, Store: env.store()}
	share := orders / (flashWorkers + 1)
	s, err := newFlashShop(env, p)
	if err != nil {
		return result{}, err
	}
	defer s.Close()
	if err := s.reset(ctx); err != nil {
		return result{}, fmt.Errorf("put %d units on sale: %w", units, err)
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
		return result{}, err
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
		return result{}, err
	}
	total := &flashTally{MinLeft: mine.MinLeft}
	total.merge(mine)
	for i := range tallies {
		total.merge(&tallies[i])
	}
	final, err := s.left(ctx)
	if err != nil {
		return result{}, fmt.Errorf("read the stock: %w", err)
	}
	total.MinLeft = min(total.MinLeft, lowest, final)

	r := result{Variant: variant, Naive: variant == "naive"}
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
	r.firstError(total.FirstErr)
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

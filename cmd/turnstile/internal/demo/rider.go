//go:build unix

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
)

// The double assignment: two dispatchers give riders to the same orders.
const (
	riderOrders      = 200
	riderRiders      = 1000
	riderDispatchers = 2  // processes
	riderParallel    = 16 // orders each dispatcher handles at once
	// riderGap is the time between selecting a rider and the separate
	// transaction that assigns it.
	riderGap = 2 * time.Millisecond
)

// riderParams is what a dispatcher process needs to know.
type riderParams struct {
	Variant string `json:"variant"`
	Run     string `json:"run"` // key prefix of this run
}

// riderTally is what one dispatcher did.
type riderTally struct {
	Assigned int64  `json:"assigned"`
	Skipped  int64  `json:"skipped"` // orders it found already assigned
	Failed   int64  `json:"failed"`
	FirstErr string `json:"first_error,omitempty"`
}

func riderFree(run string) string { return "demo:rider:{" + run + "}:free" }
func riderOrderKey(run string, i int) string {
	return "demo:rider:{" + run + "}:order:" + strconv.Itoa(i)
}

// dispatchOrder is the dispatcher's code for one order: is it unassigned?
// select an available rider; then, separately, assign it.
func dispatchOrder(ctx context.Context, rc rueidis.Client, run string, order int) (assigned bool, err error) {
	key := riderOrderKey(run, order)
	n, err := rc.Do(ctx, rc.B().Llen().Key(key).Build()).AsInt64()
	if err != nil || n > 0 {
		return false, err
	}
	rider, err := rc.Do(ctx, rc.B().Spop().Key(riderFree(run)).Build()).ToString()
	if err != nil {
		return false, fmt.Errorf("select a rider: %w", err)
	}
	if err := sleepCtx(ctx, riderGap); err != nil {
		return false, err
	}
	return true, rc.Do(ctx, rc.B().Rpush().Key(key).Element(rider).Build()).Error()
}

// riderWorker is one dispatcher process.
func riderWorker(ctx context.Context, env *environment, spec workerSpec, w *workerLink) (any, error) {
	var p riderParams
	if err := json.Unmarshal(spec.Params, &p); err != nil {
		return nil, err
	}
	var c *turnstile.Client
	if p.Variant == "lock" {
		var err error
		if c, err = env.newClient(turnstile.WithInstanceID("dispatcher-" + strconv.Itoa(spec.Index+1))); err != nil {
			return nil, err
		}
		defer c.Close()
	}
	if err := w.ready(ctx); err != nil {
		return nil, err
	}
	var (
		t    riderTally
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range riderParallel {
		wg.Go(func() {
			for order := range next {
				var assigned bool
				var err error
				if c == nil {
					assigned, err = dispatchOrder(ctx, env.rc, p.Run, order)
				} else {
					err = turnstile.Do(ctx, c, "lock:order:"+p.Run+":"+strconv.Itoa(order), func(ctx context.Context, _ *turnstile.Lease) error {
						var err error
						assigned, err = dispatchOrder(ctx, env.rc, p.Run, order)
						return err
					}, turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: -1}))
				}
				mu.Lock()
				switch {
				case err != nil:
					countFailure(&t.Failed, &t.FirstErr, err)
				case assigned:
					t.Assigned++
				default:
					t.Skipped++
				}
				mu.Unlock()
			}
		})
	}
	for order := 1; order <= riderOrders && ctx.Err() == nil; order++ {
		next <- order
	}
	close(next)
	wg.Wait()
	return &t, ctx.Err()
}

// runRider runs two dispatchers on the same orders, without and with a
// lock per order.
func runRider(ctx context.Context, env *environment) ([]result, error) {
	return runVariants(ctx, env, []string{"naive", "lock"}, runRiderVariant)
}

func runRiderVariant(ctx context.Context, env *environment, variant string) (result, error) {
	p := riderParams{Variant: variant, Run: variant + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	riders := make([]string, riderRiders)
	for i := range riders {
		riders[i] = "rider-" + strconv.Itoa(i+1)
	}
	if err := env.rc.Do(ctx, env.rc.B().Sadd().Key(riderFree(p.Run)).Member(riders...).Build()).Error(); err != nil {
		return result{}, err
	}
	raw, _ := json.Marshal(p)
	specs := make([]workerSpec, riderDispatchers)
	for i := range specs {
		specs[i] = workerSpec{Scenario: "rider", Variant: variant, Params: raw}
	}
	env.progress("rider %s: %d dispatcher processes, %d orders, %s riders...", variant, riderDispatchers, riderOrders, num(riderRiders))
	g, err := startWorkers(ctx, env, specs)
	if err != nil {
		return result{}, err
	}
	defer g.Close()
	g.goAll()
	tallies := make([]riderTally, riderDispatchers)
	ptrs := make([]any, len(tallies))
	for i := range tallies {
		ptrs[i] = &tallies[i]
	}
	if err := g.wait(ctx, ptrs...); err != nil {
		return result{}, err
	}
	var failed int64
	firstErr := ""
	for _, t := range tallies {
		failed += t.Failed
		if firstErr == "" {
			firstErr = t.FirstErr
		}
	}

	var doubled, unassigned, riders64 int64
	example := ""
	for order := 1; order <= riderOrders; order++ {
		got, err := env.rc.Do(ctx, env.rc.B().Lrange().Key(riderOrderKey(p.Run, order)).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil && !errors.Is(err, rueidis.Nil) {
			return result{}, err
		}
		riders64 += int64(len(got))
		switch {
		case len(got) == 0:
			unassigned++
		case len(got) > 1:
			doubled++
			if example == "" {
				example = fmt.Sprintf("order %d got %v", order, got)
			}
		}
	}
	r := result{Variant: variant, Naive: variant == "naive"}
	r.OK = doubled == 0 && unassigned == 0 && failed == 0
	switch {
	case doubled > 0:
		r.Summary = fmt.Sprintf("%d of %d orders got more than one rider (%s); %d riders sent for %d orders", doubled, riderOrders, example, riders64, riderOrders)
	case r.OK:
		r.Summary = fmt.Sprintf("exactly one rider for each of %d orders", riderOrders)
	default:
		r.Summary = fmt.Sprintf("%d orders without a rider, %d dispatches failed", unassigned, failed)
	}
	r.firstError(firstErr)
	r.add("store", "redis")
	r.add("dispatchers", riderDispatchers)
	r.add("orders", riderOrders)
	r.add("orders_with_several_riders", doubled)
	r.add("orders_without_rider", unassigned)
	r.add("riders_assigned", riders64)
	r.add("failed", failed)
	return r, nil
}

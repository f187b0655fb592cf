//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/claim"
)

// The limited-issue coupon: redeemers race for the same codes.
const (
	couponCodes     = 200
	couponRedeemers = 8
	// couponGap is the time the naive code spends between reading that a
	// coupon is unused and marking it used (checking the cart, pricing):
	// the window in which other redeemers read it unused too.
	couponGap = time.Millisecond
)

// couponTally is what the redeemers of one variant came to.
type couponTally struct {
	mu       sync.Mutex
	winners  map[string]int // code → redeemers told they got it
	toldUsed int64
	failed   int64
	firstErr string
}

func (t *couponTally) record(code string, won, used bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil:
		countFailure(&t.failed, &t.firstErr, err)
	case won:
		t.winners[code]++
	case used:
		t.toldUsed++
	}
}

// redeemFunc redeems code for redeemer once: won or told it is used.
type redeemFunc func(ctx context.Context, code, redeemer string) (won, used bool, err error)

// runCoupon runs every variant of the coupon race that the servers allow.
func runCoupon(ctx context.Context, env *environment) ([]result, error) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	type variant struct {
		name, store string
		setup       func(ctx context.Context, codes []string) (redeemFunc, error)
	}
	var vs []variant
	if env.pool != nil {
		vs = append(vs,
			variant{"naive", "postgres", func(ctx context.Context, codes []string) (redeemFunc, error) { return naivePGCoupons(ctx, env, codes) }},
			variant{"update-where-unused", "postgres", func(ctx context.Context, codes []string) (redeemFunc, error) {
				if err := claim.Migrate(ctx, env.pool); err != nil {
					return nil, err
				}
				c, err := claim.NewPostgresCoupons(env.pool)
				if err != nil {
					return nil, err
				}
				return claimRedeem(ctx, c, codes)
			}})
	} else {
		vs = append(vs, variant{"naive", "redis", func(ctx context.Context, codes []string) (redeemFunc, error) {
			return naiveRedisCoupons(ctx, env, codes)
		}})
		skip := "coupon: update-where-unused needs PostgreSQL, which this run has not: skipped (the naive and claim variants run on Redis)"
		env.progress("%s", skip)
		env.notes = append(env.notes, skip)
	}
	vs = append(vs, variant{"redis-script", "redis", func(ctx context.Context, codes []string) (redeemFunc, error) {
		c, err := claim.NewRedisCoupons(env.rc, "demo:coupon:"+run)
		if err != nil {
			return nil, err
		}
		return claimRedeem(ctx, c, codes)
	}})
	env.progress("coupon: the MySQL variant of claim's coupons is not run: the demo starts no MySQL server")

	var rs []result
	for _, v := range vs {
		codes := make([]string, couponCodes)
		for i := range codes {
			codes[i] = fmt.Sprintf("SPRING-%s-%s-%04d", run, v.name, i)
		}
		redeem, err := v.setup(ctx, codes)
		if err != nil {
			return rs, fmt.Errorf("%s: issue %d coupons: %w", v.name, couponCodes, err)
		}
		env.progress("coupon %s: %d redeemers race for each of %d coupons on %s...", v.name, couponRedeemers, couponCodes, v.store)
		t := &couponTally{winners: map[string]int{}}
		start := time.Now()
		var wg sync.WaitGroup
		for r := range couponRedeemers {
			who := "shopper-" + strconv.Itoa(r+1)
			wg.Go(func() {
				for _, code := range codes {
					if ctx.Err() != nil {
						return
					}
					won, used, err := redeem(ctx, code, who)
					t.record(code, won, used, err)
				}
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return rs, err
		}
		rs = append(rs, couponResult(v.name, v.store, t, time.Since(start)))
	}
	return rs, nil
}

// claimRedeem issues codes in c and redeems through it.
func claimRedeem(ctx context.Context, c claim.Coupons, codes []string) (redeemFunc, error) {
	if _, err := c.Issue(ctx, codes...); err != nil {
		return nil, err
	}
	return func(ctx context.Context, code, redeemer string) (bool, bool, error) {
		_, err := c.Redeem(ctx, code, redeemer)
		if errors.Is(err, claim.ErrUsed) {
			return false, true, nil
		}
		return err == nil, false, err
	}, nil
}

// naivePGCoupons is the code that double-issues: read whether the coupon
// is used; then, in another statement, mark it used.
func naivePGCoupons(ctx context.Context, env *environment, codes []string) (redeemFunc, error) {
	if _, err := env.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS turnstile_demo_coupons (
		code text PRIMARY KEY, used boolean NOT NULL DEFAULT false, used_by text)`); err != nil {
		return nil, err
	}
	if _, err := env.pool.Exec(ctx, `INSERT INTO turnstile_demo_coupons (code) SELECT unnest($1::text[])`, codes); err != nil {
		return nil, err
	}
	return func(ctx context.Context, code, redeemer string) (bool, bool, error) {
		var used bool
		if err := env.pool.QueryRow(ctx, `SELECT used FROM turnstile_demo_coupons WHERE code = $1`, code).Scan(&used); err != nil {
			return false, false, err
		}
		if used {
			return false, true, nil
		}
		if err := sleepCtx(ctx, couponGap); err != nil {
			return false, false, err
		}
		_, err := env.pool.Exec(ctx, `UPDATE turnstile_demo_coupons SET used = true, used_by = $2 WHERE code = $1`, code, redeemer)
		return err == nil, false, err
	}, nil
}

// naiveRedisCoupons is the same mistake on Redis: HGET, then HSET.
func naiveRedisCoupons(ctx context.Context, env *environment, codes []string) (redeemFunc, error) {
	key := func(code string) string { return "demo:coupon:naive:" + code }
	for _, code := range codes {
		if err := env.rc.Do(ctx, env.rc.B().Hset().Key(key(code)).FieldValue().FieldValue("used", "0").Build()).Error(); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, code, redeemer string) (bool, bool, error) {
		used, err := env.rc.Do(ctx, env.rc.B().Hget().Key(key(code)).Field("used").Build()).ToString()
		if err != nil {
			return false, false, err
		}
		if used == "1" {
			return false, true, nil
		}
		if err := sleepCtx(ctx, couponGap); err != nil {
			return false, false, err
		}
		err = env.rc.Do(ctx, env.rc.B().Hset().Key(key(code)).FieldValue().FieldValue("used", "1").FieldValue("by", redeemer).Build()).Error()
		return err == nil, false, err
	}, nil
}

// couponResult is the verdict of one variant.
func couponResult(variant, store string, t *couponTally, elapsed time.Duration) result {
	var issued, double, unredeemed int64
	for _, n := range t.winners {
		issued += int64(n)
		if n > 1 {
			double++
		}
	}
	unredeemed = int64(couponCodes - len(t.winners))
	r := result{Variant: variant, Naive: variant == "naive"}
	r.OK = issued == couponCodes && double == 0 && unredeemed == 0 && t.failed == 0
	switch {
	case double > 0:
		r.Summary = fmt.Sprintf("double-issued %s of %s coupons: %s redemptions succeeded, %s more than there are coupons",
			num(double), num(int64(couponCodes)), num(issued), num(issued-couponCodes))
	case r.OK:
		r.Summary = fmt.Sprintf("every coupon issued exactly once: %s redemptions, %s told \"already used\" with the winner's name",
			num(issued), num(t.toldUsed))
	default:
		r.Summary = fmt.Sprintf("%s redemptions, %s coupons never issued, %s failed", num(issued), num(unredeemed), num(t.failed))
	}
	r.Summary += fmt.Sprintf(", %s redeemers on %s", num(int64(couponRedeemers)), store)
	r.firstError(t.firstErr)
	r.add("store", store)
	r.add("coupons", couponCodes)
	r.add("redeemers", couponRedeemers)
	r.add("redemptions", issued)
	r.add("double_issued", double)
	r.add("unredeemed", unredeemed)
	r.add("told_used", t.toldUsed)
	r.add("failed", t.failed)
	r.add("seconds", elapsed.Seconds())
	return r
}

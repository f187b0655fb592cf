package claim_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/claim"
)

// codes returns n distinct coupon codes for one test.
func codes(prefix string, n int) []string {
	cs := make([]string, n)
	for i := range cs {
		cs[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return cs
}

// Eight redeemers, each over connections of its own, try every one of 150
// coupons at once, in the same order so that they collide on each code:
// every coupon goes to exactly one of them, every other redeemer is told
// who has it, and the store agrees.
func TestCouponsRedeemedExactlyOnce(t *testing.T) {
	const (
		coupons   = 150
		redeemers = 8
	)
	for _, st := range couponStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := ctxFor(t, 60*time.Second)
			prefix := unique("once-" + st.name)
			cs := codes(prefix, coupons)
			if n, err := st.connect(t, prefix).Issue(ctx, cs...); err != nil || n != coupons {
				t.Fatalf("Issue = %d, %v; want %d", n, err, coupons)
			}
			stores := make([]claim.Coupons, redeemers)
			for i := range stores {
				stores[i] = st.connect(t, prefix)
			}
			var (
				mu      sync.Mutex
				winners = map[string][]string{} // code → who was told it won
				told    = map[string][]string{} // code → whom losers were told has it
				failed  []error
				wg      sync.WaitGroup
				start   = make(chan struct{})
			)
			for r, store := range stores {
				who := fmt.Sprintf("user-%d", r)
				wg.Go(func() {
					<-start
					for _, code := range cs {
						red, err := store.Redeem(ctx, code, who)
						var used *claim.UsedError
						mu.Lock()
						switch {
						case err == nil && !red.Again && red.By == who && !red.At.IsZero():
							winners[code] = append(winners[code], who)
						case errors.As(err, &used) && errors.Is(err, claim.ErrUsed) && used.By != who:
							told[code] = append(told[code], used.By)
						default:
							failed = append(failed, fmt.Errorf("%s redeeming %s: %+v, %v", who, code, red, err))
						}
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			if len(failed) > 0 {
				t.Fatalf("%d unexpected outcomes, first: %v", len(failed), failed[0])
			}
			check := st.connect(t, prefix)
			for _, code := range cs {
				w := winners[code]
				if len(w) != 1 {
					t.Fatalf("coupon %s went to %d redeemers: %v", code, len(w), w)
				}
				if len(told[code]) != redeemers-1 {
					t.Fatalf("coupon %s: %d redeemers told it was used, want %d", code, len(told[code]), redeemers-1)
				}
				for _, by := range told[code] {
					if by != w[0] {
						t.Fatalf("coupon %s: a loser was told %s has it; %s won", code, by, w[0])
					}
				}
				cp, err := check.Lookup(ctx, code)
				if err != nil || !cp.Used || cp.By != w[0] {
					t.Fatalf("Lookup(%s) = %+v, %v; want used by %s", code, cp, err, w[0])
				}
			}
		})
	}
}

// A retry of a redemption that succeeded succeeds again, with the first
// time; another redeemer is told who has it; an unknown code is its own
// error; issuing again keeps what is there.
func TestCouponRedeemRetryLookupIssue(t *testing.T) {
	for _, st := range couponStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := ctxFor(t, 20*time.Second)
			prefix := unique("retry-" + st.name)
			c := st.connect(t, prefix)
			a, b := prefix+"-a", prefix+"-b"
			if n, err := c.Issue(ctx, a, b, a); err != nil || n != 2 {
				t.Fatalf("Issue(a, b, a) = %d, %v; want 2 new", n, err)
			}
			if cp, err := c.Lookup(ctx, a); err != nil || cp.Used || cp.By != "" || !cp.At.IsZero() || cp.Code != a {
				t.Fatalf("Lookup of an unused coupon = %+v, %v", cp, err)
			}
			before := time.Now().Add(-time.Minute)
			first, err := c.Redeem(ctx, a, "alice")
			if err != nil || first.Again || first.By != "alice" || first.At.Before(before) {
				t.Fatalf("first Redeem = %+v, %v", first, err)
			}
			again, err := c.Redeem(ctx, a, "alice")
			if err != nil || !again.Again || !again.At.Equal(first.At) {
				t.Fatalf("Redeem again by the same redeemer = %+v, %v; want success with Again and At %v", again, err, first.At)
			}
			_, err = c.Redeem(ctx, a, "bob")
			var used *claim.UsedError
			if !errors.As(err, &used) || used.By != "alice" || !used.At.Equal(first.At) || used.Code != a {
				t.Fatalf("Redeem by another = %v; want UsedError by alice at %v", err, first.At)
			}
			if !errors.Is(err, claim.ErrUsed) {
				t.Fatalf("%v does not match ErrUsed", err)
			}
			if _, err := c.Redeem(ctx, prefix+"-never", "bob"); !errors.Is(err, claim.ErrUnknownCode) || errors.Is(err, claim.ErrUsed) {
				t.Fatalf("Redeem of an unknown code = %v; want ErrUnknownCode", err)
			}
			if _, err := c.Lookup(ctx, prefix+"-never"); !errors.Is(err, claim.ErrUnknownCode) {
				t.Fatalf("Lookup of an unknown code = %v; want ErrUnknownCode", err)
			}
			if n, err := c.Issue(ctx, a, b, prefix+"-c"); err != nil || n != 1 {
				t.Fatalf("Issue again = %d, %v; want 1 new", n, err)
			}
			if cp, err := c.Lookup(ctx, a); err != nil || !cp.Used || cp.By != "alice" || !cp.At.Equal(first.At) {
				t.Fatalf("Lookup after issuing again = %+v, %v; want still used by alice", cp, err)
			}
			// A batch larger than one statement.
			big := codes(prefix+"-big", 1201)
			if n, err := c.Issue(ctx, big...); err != nil || n != len(big) {
				t.Fatalf("Issue of %d = %d, %v", len(big), n, err)
			}
			if _, err := c.Redeem(ctx, big[1200], "carol"); err != nil {
				t.Fatalf("Redeem of the last of a big batch: %v", err)
			}
		})
	}
}

// On PostgreSQL a redemption inside a transaction rolls back with it, and
// a concurrent redeemer waits for that transaction: it wins when it rolls
// back.
func TestPostgresCouponInTransaction(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	pool := pgPool(t, 3)
	c, err := claim.NewPostgresCoupons(pool)
	if err != nil {
		t.Fatal(err)
	}
	code := unique("tx")
	if _, err := c.Issue(ctx, code); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	inTx, err := claim.NewPostgresCoupons(tx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inTx.Redeem(ctx, code, "order-1"); err != nil {
		t.Fatal(err)
	}
	var (
		wg  sync.WaitGroup
		red claim.Redemption
		rer error
	)
	wg.Go(func() { red, rer = c.Redeem(ctx, code, "order-2") })
	waitForLockWait(t, ctx, pool)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if rer != nil || red.By != "order-2" {
		t.Fatalf("Redeem after the other's rollback = %+v, %v; want order-2's", red, rer)
	}
}

// waitForLockWait returns once a session waits for a row lock.
func waitForLockWait(t *testing.T, ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) {
	t.Helper()
	for {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no session ever waited for the row lock")
		case <-time.After(2 * time.Millisecond):
		}
	}
}

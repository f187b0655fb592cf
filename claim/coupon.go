package claim

import (
	"context"
	"time"
)

// A Coupon is a limited-issue code as its store holds it.
type Coupon struct {
	Code string
	Used bool
	By   string    // who redeemed it; empty while unused
	At   time.Time // when, by the store's clock; zero while unused
}

// A Redemption is a successful redemption of a coupon.
type Redemption struct {
	Code string
	By   string
	At   time.Time // when the coupon was redeemed, by the store's clock
	// Again is true when the redeemer had already redeemed this coupon:
	// the call retried a redemption whose reply was lost (a timeout, a
	// dropped connection). It is still a success, and At is the time of
	// the first redemption.
	Again bool
}

// Coupons is a set of limited-issue coupons in some store:
// PostgresCoupons, MySQLCoupons and RedisCoupons implement it.
//
// Redeem has the semantics of
//
//	UPDATE coupons SET used = true, used_by = $2, used_at = now()
//	 WHERE code = $1 AND used = false
//
// one atomic step on the store: of any number of concurrent redeemers of
// one code exactly one succeeds, and every other gets a *UsedError
// (ErrUsed) that names the winner. A redeemer that calls again for a
// coupon it already holds succeeds again, with Again set, so that a
// redemption whose reply was lost can simply be retried. A code that was
// never issued gets ErrUnknownCode.
type Coupons interface {
	// Issue creates the coupons of codes, unused, and returns how many of
	// them are new; codes that already exist are left as they are (used
	// or not), so that an issue can be repeated after a failure.
	Issue(ctx context.Context, codes ...string) (issued int, err error)
	// Redeem redeems code for redeemer.
	Redeem(ctx context.Context, code, redeemer string) (Redemption, error)
	// Lookup returns code's coupon, or ErrUnknownCode.
	Lookup(ctx context.Context, code string) (Coupon, error)
}

var (
	_ Coupons = (*PostgresCoupons)(nil)
	_ Coupons = (*MySQLCoupons)(nil)
	_ Coupons = (*RedisCoupons)(nil)
)

// redeemed turns the coupon's state after a redeem that did not update
// it into the outcome for redeemer: a repeat of its own redemption, or
// ErrUsed.
func redeemed(code, redeemer, by string, at time.Time) (Redemption, error) {
	if by == redeemer {
		return Redemption{Code: code, By: by, At: at, Again: true}, nil
	}
	return Redemption{}, &UsedError{Code: code, By: by, At: at}
}

// issueChunk is the most codes one statement inserts.
const issueChunk = 500

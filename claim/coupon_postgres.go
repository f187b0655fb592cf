package claim

import (
	"context"
	_ "embed" // the SQL
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
)

var (
	//go:embed sql/postgres_redeem.sql
	postgresRedeemSQL string
	//go:embed sql/postgres_issue.sql
	postgresIssueSQL string
)

const postgresCouponSQL = "SELECT used, coalesce(used_by, ''), used_at FROM turnstile_coupons WHERE code = $1"

// PostgresCoupons keeps coupons in rows of table turnstile_coupons (see
// Migrate). A redemption is one UPDATE of one row (sql/postgres_redeem.sql)
// and one round trip; a redeemer that loses, or retries, reads the row once
// more to learn who holds it.
//
// Its Querier may be a pool, a connection or a transaction. In a
// transaction, the redemption commits or rolls back with it (with the
// order that uses the coupon, say), and concurrent redeemers of the same
// code wait for that transaction to end before they learn the outcome.
//
// A PostgresCoupons is safe for concurrent use when its Querier is.
type PostgresCoupons struct {
	db Querier
}

// NewPostgresCoupons returns the coupons of db's turnstile_coupons table.
// Run Migrate once before using it; NewPostgresCoupons makes no round trip.
func NewPostgresCoupons(db Querier) (*PostgresCoupons, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil querier", turnstile.ErrInvalidOption)
	}
	return &PostgresCoupons{db: db}, nil
}

// Issue implements Coupons.Issue, in statements of up to 500 codes.
func (c *PostgresCoupons) Issue(ctx context.Context, codes ...string) (int, error) {
	if err := checkCodes(codes); err != nil {
		return 0, err
	}
	issued := 0
	for start := 0; start < len(codes); start += issueChunk {
		chunk := codes[start:min(start+issueChunk, len(codes))]
		tag, err := c.db.Exec(ctx, postgresIssueSQL, chunk)
		if err != nil {
			return issued, fmt.Errorf("claim: issue %d coupons: %w", len(chunk), err)
		}
		issued += int(tag.RowsAffected())
	}
	return issued, nil
}

// Redeem implements Coupons.Redeem.
func (c *PostgresCoupons) Redeem(ctx context.Context, code, redeemer string) (Redemption, error) {
	if err := checkName("coupon code", code); err != nil {
		return Redemption{}, err
	}
	if err := checkName("redeemer", redeemer); err != nil {
		return Redemption{}, err
	}
	var at time.Time
	err := c.db.QueryRow(ctx, postgresRedeemSQL, code, redeemer).Scan(&at)
	if err == nil {
		return Redemption{Code: code, By: redeemer, At: at}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Redemption{}, fmt.Errorf("claim: redeem %q: %w", code, err)
	}
	// Used already, or unknown. A new statement sees the commit of the
	// redemption that this one waited for.
	cp, err := c.Lookup(ctx, code)
	if err != nil {
		return Redemption{}, err
	}
	if !cp.Used {
		// Only a reset of the row by hand between the two statements
		// gets here.
		return Redemption{}, fmt.Errorf("claim: redeem %q: the coupon was reset while it was redeemed; try again", code)
	}
	return redeemed(code, redeemer, cp.By, cp.At)
}

// Lookup implements Coupons.Lookup.
func (c *PostgresCoupons) Lookup(ctx context.Context, code string) (Coupon, error) {
	if err := checkName("coupon code", code); err != nil {
		return Coupon{}, err
	}
	cp := Coupon{Code: code}
	var at *time.Time
	err := c.db.QueryRow(ctx, postgresCouponSQL, code).Scan(&cp.Used, &cp.By, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return Coupon{}, fmt.Errorf("%w: %q", ErrUnknownCode, code)
	}
	if err != nil {
		return Coupon{}, fmt.Errorf("claim: look up coupon %q: %w", code, err)
	}
	if at != nil {
		cp.At = *at
	}
	return cp, nil
}

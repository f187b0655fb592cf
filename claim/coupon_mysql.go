package claim

import (
	"context"
	"database/sql"
	_ "embed" // the SQL
	"errors"
	"fmt"

	"github.com/turnstilelock/turnstile"
)

//go:embed sql/mysql_redeem.sql
var mysqlRedeemSQL string

var mysqlCouponSQL = "SELECT used, COALESCE(used_by, ''), " + micros("used_at") + " FROM turnstile_coupons WHERE code = ?"

// MySQLCoupons keeps coupons in rows of table turnstile_coupons on MySQL
// or MariaDB (see MigrateMySQL). A redemption is one UPDATE of one row
// (sql/mysql_redeem.sql) and one more round trip to read the row, for the
// time of the redemption or its winner.
//
// Its SQLQuerier may be a *sql.DB, a *sql.Conn or a *sql.Tx; in a
// transaction, the redemption commits or rolls back with it. Times are
// kept in UTC.
//
// A MySQLCoupons is safe for concurrent use when its SQLQuerier is.
type MySQLCoupons struct {
	db SQLQuerier
}

// NewMySQLCoupons returns the coupons of db's turnstile_coupons table.
// Run MigrateMySQL once before using it; NewMySQLCoupons makes no round
// trip.
func NewMySQLCoupons(db SQLQuerier) (*MySQLCoupons, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil SQL querier", turnstile.ErrInvalidOption)
	}
	return &MySQLCoupons{db: db}, nil
}

// Issue implements Coupons.Issue, in statements of up to 500 codes.
func (c *MySQLCoupons) Issue(ctx context.Context, codes ...string) (int, error) {
	if err := checkCodes(codes); err != nil {
		return 0, err
	}
	issued := 0
	for start := 0; start < len(codes); start += issueChunk {
		chunk := codes[start:min(start+issueChunk, len(codes))]
		// A duplicate's "update" changes nothing, and a row that does not
		// change counts 0 rows affected: the count is the new codes.
		q := "INSERT INTO turnstile_coupons (code, issued_at) VALUES " +
			repeatJoin("(?, UTC_TIMESTAMP(6))", len(chunk)) +
			" ON DUPLICATE KEY UPDATE code = code"
		args := make([]any, len(chunk))
		for i, code := range chunk {
			args[i] = code
		}
		res, err := c.db.ExecContext(ctx, q, args...)
		if err != nil {
			return issued, fmt.Errorf("claim: issue %d coupons: %w", len(chunk), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return issued, fmt.Errorf("claim: issue %d coupons: %w", len(chunk), err)
		}
		issued += int(n)
	}
	return issued, nil
}

// Redeem implements Coupons.Redeem.
func (c *MySQLCoupons) Redeem(ctx context.Context, code, redeemer string) (Redemption, error) {
	if err := checkName("coupon code", code); err != nil {
		return Redemption{}, err
	}
	if err := checkName("redeemer", redeemer); err != nil {
		return Redemption{}, err
	}
	res, err := c.db.ExecContext(ctx, mysqlRedeemSQL, redeemer, code)
	if err != nil {
		return Redemption{}, fmt.Errorf("claim: redeem %q: %w", code, err)
	}
	won, err := res.RowsAffected()
	if err != nil {
		return Redemption{}, fmt.Errorf("claim: redeem %q: %w", code, err)
	}
	cp, err := c.Lookup(ctx, code)
	if err != nil {
		return Redemption{}, err
	}
	if won == 1 {
		return Redemption{Code: code, By: redeemer, At: cp.At}, nil
	}
	if !cp.Used {
		return Redemption{}, fmt.Errorf("claim: redeem %q: the coupon was reset while it was redeemed; try again", code)
	}
	return redeemed(code, redeemer, cp.By, cp.At)
}

// Lookup implements Coupons.Lookup.
func (c *MySQLCoupons) Lookup(ctx context.Context, code string) (Coupon, error) {
	if err := checkName("coupon code", code); err != nil {
		return Coupon{}, err
	}
	cp := Coupon{Code: code}
	var at sql.NullInt64
	err := c.db.QueryRowContext(ctx, mysqlCouponSQL, code).Scan(&cp.Used, &cp.By, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Coupon{}, fmt.Errorf("%w: %q", ErrUnknownCode, code)
	}
	if err != nil {
		return Coupon{}, fmt.Errorf("claim: look up coupon %q: %w", code, err)
	}
	cp.At = fromMicros(at)
	return cp, nil
}

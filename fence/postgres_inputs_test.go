package fence_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
)

// countingQuerier fails the test if the guard sends anything.
type countingQuerier struct{ calls int }

func (q *countingQuerier) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	q.calls++
	return pgconn.CommandTag{}, errors.New("unexpected Exec")
}

func (q *countingQuerier) QueryRow(context.Context, string, ...any) pgx.Row {
	q.calls++
	return nil
}

func TestPostgresBadInput(t *testing.T) {
	ctx := context.Background()
	var nilCtx context.Context
	var nilConn *pgx.Conn
	var nilGuard *fence.Postgres
	g := newPostgres(t)
	q := &countingQuerier{}
	for _, tc := range []struct {
		name  string
		check func() error
		want  error
	}{
		{"empty resource", func() error { return g.Check(ctx, q, "", 1) }, turnstile.ErrInvalidKey},
		{"long resource", func() error { return g.Check(ctx, q, strings.Repeat("r", turnstile.MaxKeyLen+1), 1) }, turnstile.ErrInvalidKey},
		{"zero token", func() error { return g.Check(ctx, q, "r", 0) }, fence.ErrInvalidToken},
		{"token above MaxInt64", func() error { return g.Check(ctx, q, "r", math.MaxInt64+1) }, fence.ErrInvalidToken},
		{"max uint64 token", func() error { return g.Check(ctx, q, "r", math.MaxUint64) }, fence.ErrInvalidToken},
		{"nil querier", func() error { return g.Check(ctx, nil, "r", 1) }, turnstile.ErrInvalidOption},
		{"nil *pgx.Conn", func() error { return g.Check(ctx, nilConn, "r", 1) }, turnstile.ErrInvalidOption},
		{"nil context", func() error { return g.Check(nilCtx, q, "r", 1) }, turnstile.ErrInvalidOption},
		{"nil guard", func() error { return nilGuard.Check(ctx, q, "r", 1) }, turnstile.ErrInvalidOption},
		{"Last empty resource", func() error { _, err := g.Last(ctx, q, ""); return err }, turnstile.ErrInvalidKey},
		{"Last nil querier", func() error { _, err := g.Last(ctx, nilConn, "r"); return err }, turnstile.ErrInvalidOption},
		{"Migrate nil querier", func() error { return fence.Migrate(ctx, nil) }, turnstile.ErrInvalidOption},
		{"Migrate nil context", func() error { return fence.Migrate(nilCtx, q) }, turnstile.ErrInvalidOption},
		{"nil guard Migrate", func() error { return nilGuard.Migrate(ctx, q) }, turnstile.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.check(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if q.calls != 0 {
		t.Fatalf("bad input reached the database %d times", q.calls)
	}
	if err := g.Check(ctx, q, "r", math.MaxInt64+1); !strings.Contains(err.Error(), "9223372036854775808") {
		t.Fatalf("error for a token above MaxInt64 does not name it: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  fence.Option
	}{
		{"nil", nil},
		{"empty table", fence.WithTable("")},
		{"upper case", fence.WithTable("Fences")},
		{"digit first", fence.WithTable("1fences")},
		{"dash", fence.WithTable("my-fences")},
		{"quote", fence.WithTable(`f"; DROP TABLE x; --`)},
		{"three parts", fence.WithTable("a.b.c")},
		{"empty schema", fence.WithTable(".fences")},
		{"too long", fence.WithTable(strings.Repeat("f", 64))},
		{"Redis keys", fence.WithKeysOf(keyPrefix("app:"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := fence.NewPostgres(tc.opt); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Fatalf("NewPostgres: %v, want ErrInvalidOption", err)
			}
		})
	}
	if _, err := fence.NewPostgres(fence.WithTable(strings.Repeat("f", 63))); err != nil {
		t.Fatalf("63-byte table name: %v", err)
	}
}

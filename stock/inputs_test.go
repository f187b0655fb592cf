package stock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/stock"
)

var longKey = strings.Repeat("k", turnstile.MaxKeyLen+1)

func TestConstructorsRefuseBadInput(t *testing.T) {
	srv := testserver.StartRedis(t)
	client := redisClient(t, srv.Addr())
	pool := pgPool(t, 1)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"Counter/NilClient", second(stock.NewCounter(nil, "k")), turnstile.ErrInvalidOption},
		{"Counter/EmptyKey", second(stock.NewCounter(client, "")), turnstile.ErrInvalidKey},
		{"Counter/LongKey", second(stock.NewCounter(client, longKey)), turnstile.ErrInvalidKey},
		{"Sharded/NilClient", second(stock.NewSharded(nil, "k", 4)), turnstile.ErrInvalidOption},
		{"Sharded/EmptyKey", second(stock.NewSharded(client, "", 4)), turnstile.ErrInvalidKey},
		{"Sharded/LongKey", second(stock.NewSharded(client, longKey, 4)), turnstile.ErrInvalidKey},
		{"Sharded/ZeroShards", second(stock.NewSharded(client, "k", 0)), turnstile.ErrInvalidOption},
		{"Sharded/NegativeShards", second(stock.NewSharded(client, "k", -1)), turnstile.ErrInvalidOption},
		{"Sharded/65Shards", second(stock.NewSharded(client, "k", stock.MaxShards+1)), turnstile.ErrInvalidOption},
		{"CAS/NilPool", second(stock.NewCAS(nil)), turnstile.ErrInvalidOption},
		{"CAS/NilOption", second(stock.NewCAS(pool, nil)), turnstile.ErrInvalidOption},
		{"CAS/NegativeRetries", second(stock.NewCAS(pool, stock.WithRetries(-1))), turnstile.ErrInvalidOption},
		{"CAS/TooManyRetries", second(stock.NewCAS(pool, stock.WithRetries(stock.MaxCASRetries+1))), turnstile.ErrInvalidOption},
		{"CAS/ZeroBackoff", second(stock.NewCAS(pool, stock.WithBackoff(0))), turnstile.ErrInvalidOption},
		{"CAS/NegativeBackoff", second(stock.NewCAS(pool, stock.WithBackoff(-time.Millisecond))), turnstile.ErrInvalidOption},
		{"CAS/LongBackoff", second(stock.NewCAS(pool, stock.WithBackoff(2*time.Second))), turnstile.ErrInvalidOption},
		{"Migrate/NilQuerier", stock.Migrate(context.Background(), nil), turnstile.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("err = %v; want %v", tc.err, tc.want)
			}
		})
	}
	// The edges of the ranges are accepted.
	for name, err := range map[string]error{
		"1 shard":    second(stock.NewSharded(client, "k", 1)),
		"64 shards":  second(stock.NewSharded(client, "k", stock.MaxShards)),
		"0 retries":  second(stock.NewCAS(pool, stock.WithRetries(0))),
		"1s backoff": second(stock.NewCAS(pool, stock.WithBackoff(time.Second))),
		"max key":    second(stock.NewCounter(client, longKey[1:])),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Bad quantities, shards and ids are refused before any round trip: the
// stock is left as it was.
func TestMethodsRefuseBadInput(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	client := redisClient(t, srv.Addr())
	counter, err := stock.NewCounter(client, "bad:counter")
	if err != nil {
		t.Fatal(err)
	}
	sharded := newSharded(t, srv, "bad:sharded", 4)
	cas := newCAS(t, pgPool(t, 1))
	if err := counter.Set(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if err := sharded.Set(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if err := cas.Set(ctx, "bad", 5); err != nil {
		t.Fatal(err)
	}
	const tooMany = stock.MaxQuantity + 1
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"Counter.Set/Negative", counter.Set(ctx, -1), stock.ErrInvalidQuantity},
		{"Counter.Set/TooMany", counter.Set(ctx, tooMany), stock.ErrInvalidQuantity},
		{"Counter.Take/Zero", second(counter.Take(ctx, 0)), stock.ErrInvalidQuantity},
		{"Counter.Take/Negative", second(counter.Take(ctx, -2)), stock.ErrInvalidQuantity},
		{"Counter.Take/TooMany", second(counter.Take(ctx, tooMany)), stock.ErrInvalidQuantity},
		{"Counter.Put/Zero", second(counter.Put(ctx, 0)), stock.ErrInvalidQuantity},
		{"Counter.Put/Negative", second(counter.Put(ctx, -2)), stock.ErrInvalidQuantity},
		{"Sharded.Set/Negative", sharded.Set(ctx, -1), stock.ErrInvalidQuantity},
		{"Sharded.Set/TooMany", sharded.Set(ctx, tooMany), stock.ErrInvalidQuantity},
		{"Sharded.Take/Zero", second(sharded.Take(ctx, 0)), stock.ErrInvalidQuantity},
		{"Sharded.Take/Negative", second(sharded.Take(ctx, -2)), stock.ErrInvalidQuantity},
		{"Sharded.Put/Zero", sharded.Put(ctx, 0, 0), stock.ErrInvalidQuantity},
		{"Sharded.Put/Negative", sharded.Put(ctx, 0, -1), stock.ErrInvalidQuantity},
		{"Sharded.Put/ShardBelow", sharded.Put(ctx, -1, 1), turnstile.ErrInvalidOption},
		{"Sharded.Put/ShardAbove", sharded.Put(ctx, 4, 1), turnstile.ErrInvalidOption},
		{"CAS.Set/Negative", cas.Set(ctx, "bad", -1), stock.ErrInvalidQuantity},
		{"CAS.Set/EmptyID", cas.Set(ctx, "", 1), turnstile.ErrInvalidKey},
		{"CAS.Take/Zero", second(cas.Take(ctx, "bad", 0)), stock.ErrInvalidQuantity},
		{"CAS.Take/Negative", second(cas.Take(ctx, "bad", -1)), stock.ErrInvalidQuantity},
		{"CAS.Take/EmptyID", second(cas.Take(ctx, "", 1)), turnstile.ErrInvalidKey},
		{"CAS.Take/LongID", second(cas.Take(ctx, longKey, 1)), turnstile.ErrInvalidKey},
		{"CAS.Put/Zero", second(cas.Put(ctx, "bad", 0)), stock.ErrInvalidQuantity},
		{"CAS.Put/EmptyID", second(cas.Put(ctx, "", 1)), turnstile.ErrInvalidKey},
		{"CAS.Left/EmptyID", second(cas.Left(ctx, "")), turnstile.ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("err = %v; want %v", tc.err, tc.want)
			}
		})
	}
	for name, left := range map[string]func(context.Context) (int64, error){
		"Counter": counter.Left,
		"Sharded": sharded.Left,
		"CAS":     func(ctx context.Context) (int64, error) { return cas.Left(ctx, "bad") },
	} {
		if n, err := left(ctx); err != nil || n != 5 {
			t.Errorf("%s: Left = %d, %v after refused calls; want 5", name, n, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

package stock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/stock"
)

// newCounter returns a Counter of key on srv, over a client of its own.
func newCounter(t testing.TB, srv *testserver.Redis, key string) *stock.Counter {
	t.Helper()
	c, err := stock.NewCounter(redisClient(t, srv.Addr()), key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The flash sale on a Counter: 3,847 concurrent orders for 1,000 units.
func TestCounterFlashSale(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 30*time.Second)
	// A client each, so that orders reach the server over several
	// sockets at once.
	counters := make([]*stock.Counter, 8)
	for i := range counters {
		counters[i] = newCounter(t, srv, "stock:sale:1")
	}
	if err := counters[0].Set(ctx, saleUnits); err != nil {
		t.Fatal(err)
	}

	// The raw key, not Left: this is the value that dips below zero while
	// oversubscribed orders give their units back.
	raw := redisClient(t, srv.Addr())
	smp := startSampler(ctx, func(ctx context.Context) (int64, error) {
		return raw.Do(ctx, raw.B().Get().Key("stock:sale:1").Build()).AsInt64()
	})
	s := runSale(saleOrders, func(i int) error {
		_, err := counters[i%len(counters)].Take(ctx, 1)
		return err
	})
	low := smp.finish(t)
	s.check(t, saleUnits, saleOrders)
	t.Logf("most negative raw value seen by the sampler: %d (over %d samples)", min(low, 0), smp.samples)

	if left, err := counters[0].Left(ctx); err != nil || left != 0 {
		t.Fatalf("Left = %d, %v; want 0", left, err)
	}
	if v := srv.MustDo(t, "GET", "stock:sale:1"); v != "0" {
		t.Fatalf("raw key = %q after the sale; want 0 (every give-back undone)", v)
	}
}

func TestCounterTakePutLeft(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	c := newCounter(t, srv, "stock:tpl")
	if left, err := c.Left(ctx); err != nil || left != 0 {
		t.Fatalf("Left of a missing key = %d, %v; want 0", left, err)
	}
	if err := c.Set(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Take(ctx, 3); err != nil || left != 7 {
		t.Fatalf("Take(3) = %d, %v; want 7", left, err)
	}
	// An order larger than what is left takes nothing.
	left, err := c.Take(ctx, 8)
	if !errors.Is(err, stock.ErrSoldOut) || left != 7 {
		t.Fatalf("Take(8) = %d, %v; want 7, ErrSoldOut", left, err)
	}
	if v := srv.MustDo(t, "GET", "stock:tpl"); v != "7" {
		t.Fatalf("raw key = %q after a sold-out Take; want 7", v)
	}
	// A cancelled order gives its units back.
	if left, err := c.Put(ctx, 3); err != nil || left != 10 {
		t.Fatalf("Put(3) = %d, %v; want 10", left, err)
	}
	if left, err := c.Take(ctx, 10); err != nil || left != 0 {
		t.Fatalf("Take(10) = %d, %v; want 0", left, err)
	}
	if _, err := c.Take(ctx, 1); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("Take(1) of an empty stock: %v; want ErrSoldOut", err)
	}
	if left, err := c.Left(ctx); err != nil || left != 0 {
		t.Fatalf("Left = %d, %v; want 0", left, err)
	}
	// Set replaces the level.
	if err := c.Set(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Left(ctx); err != nil || left != 4 {
		t.Fatalf("Left after Set(4) = %d, %v; want 4", left, err)
	}
}

// A key that reads below zero (another client's give-back in flight) is
// reported as zero.
func TestCounterLeftNeverNegative(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	c := newCounter(t, srv, "stock:neg")
	srv.MustDo(t, "SET", "stock:neg", "-3")
	if left, err := c.Left(ctx); err != nil || left != 0 {
		t.Fatalf("Left = %d, %v; want 0", left, err)
	}
	if left, err := c.Take(ctx, 1); !errors.Is(err, stock.ErrSoldOut) || left != 0 {
		t.Fatalf("Take = %d, %v; want 0, ErrSoldOut", left, err)
	}
	if v := srv.MustDo(t, "GET", "stock:neg"); v != "-3" {
		t.Fatalf("raw key = %q; want -3 (the Take gave its unit back)", v)
	}
}

// A Take with a cancelled context sends nothing and says why.
func TestCounterCancelledContext(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := newCounter(t, srv, "stock:ctx")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Take(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take with a cancelled context: %v; want context.Canceled", err)
	}
	if v, _ := srv.Do("EXISTS", "stock:ctx"); v != "0" {
		t.Fatalf("EXISTS = %q; a cancelled Take touched the key", v)
	}
}

package stock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/stock"
)

// newSharded returns a Sharded stock of key on srv in shards shards, over
// a client of its own.
func newSharded(t testing.TB, srv *testserver.Redis, key string, shards int) *stock.Sharded {
	t.Helper()
	s, err := stock.NewSharded(redisClient(t, srv.Addr()), key, shards)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func levels(t testing.TB, ctx context.Context, s *stock.Sharded) []int64 {
	t.Helper()
	l, err := s.Levels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The flash sale on a Sharded stock: 3,847 concurrent orders for 1,000 units
// over 8 shards, while another client rebalances now and then. No shard
// may ever read below zero.
func TestShardedFlashSale(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 30*time.Second)
	stocks := make([]*stock.Sharded, 8)
	for i := range stocks {
		stocks[i] = newSharded(t, srv, "sale:2", 8)
	}
	if err := stocks[0].Set(ctx, saleUnits); err != nil {
		t.Fatal(err)
	}

	watcher := newSharded(t, srv, "sale:2", 8)
	smp := startSampler(ctx, func(ctx context.Context) (int64, error) {
		l, err := watcher.Levels(ctx)
		return slices.Min(l), err
	})
	var (
		wg           sync.WaitGroup
		stop         = make(chan struct{})
		rebalanceErr error
	)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := watcher.Rebalance(ctx); err != nil {
				rebalanceErr = err
				return
			}
		}
	})
	perShard := make([]int64, 8)
	var mu sync.Mutex
	s := runSale(saleOrders, func(i int) error {
		shard, err := stocks[i%len(stocks)].Take(ctx, 1)
		if err == nil {
			mu.Lock()
			perShard[shard]++
			mu.Unlock()
		}
		return err
	})
	close(stop)
	wg.Wait()
	low := smp.finish(t)
	if rebalanceErr != nil {
		t.Fatal(rebalanceErr)
	}
	s.check(t, saleUnits, saleOrders)
	if low < 0 {
		t.Fatalf("a shard read %d during the sale", low)
	}
	t.Logf("lowest shard level seen: %d over %d samples; units per shard: %v", low, smp.samples, perShard)
	if got := levels(t, ctx, watcher); !slices.Equal(got, make([]int64, 8)) {
		t.Fatalf("levels after the sale = %v; want all 0", got)
	}
}

// Orders of 1 to 7 units against 500 units: an order is refused only when
// the shards together hold too few, so every refused order asked for more
// than what is left at the end.
func TestShardedMixedOrders(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 30*time.Second)
	const total = 500
	stocks := make([]*stock.Sharded, 4)
	for i := range stocks {
		stocks[i] = newSharded(t, srv, "sale:mixed", 16)
	}
	if err := stocks[0].Set(ctx, total); err != nil {
		t.Fatal(err)
	}
	var (
		mu              sync.Mutex
		taken           int64
		smallestRefused int64 = stock.MaxQuantity
	)
	s := runSale(400, func(i int) error {
		n := 1 + rand.Int64N(7)
		_, err := stocks[i%len(stocks)].Take(ctx, n)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			taken += n
		case errors.Is(err, stock.ErrSoldOut):
			smallestRefused = min(smallestRefused, n)
		}
		return err
	})
	if s.failed > 0 {
		t.Fatalf("%d orders failed, first: %v", s.failed, s.firstErr)
	}
	left, err := stocks[0].Left(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left+taken != total {
		t.Fatalf("left %d + taken %d != %d", left, taken, total)
	}
	if s.soldOut == 0 {
		t.Fatalf("no order was refused (taken %d); the test needs more orders than units", taken)
	}
	if smallestRefused <= left {
		t.Fatalf("an order of %d was refused, yet %d units are left", smallestRefused, left)
	}
	if slices.Min(levels(t, ctx, stocks[0])) < 0 {
		t.Fatalf("a shard is below zero: %v", levels(t, ctx, stocks[0]))
	}
}

func TestShardedSetSpreadsEvenly(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	s := newSharded(t, srv, "spread", 4)
	for _, tc := range []struct {
		total int64
		want  []int64
	}{
		{10, []int64{3, 3, 2, 2}},
		{3, []int64{1, 1, 1, 0}},
		{0, []int64{0, 0, 0, 0}},
		{8, []int64{2, 2, 2, 2}},
	} {
		if err := s.Set(ctx, tc.total); err != nil {
			t.Fatal(err)
		}
		if got := levels(t, ctx, s); !slices.Equal(got, tc.want) {
			t.Fatalf("Set(%d): levels %v; want %v", tc.total, got, tc.want)
		}
		if left, err := s.Left(ctx); err != nil || left != tc.total {
			t.Fatalf("Set(%d): Left = %d, %v", tc.total, left, err)
		}
	}
	// The documented key names.
	if v := srv.MustDo(t, "GET", "{spread}:0"); v != "2" {
		t.Fatalf("{spread}:0 = %q; want 2", v)
	}
}

func TestShardedTakePut(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	s := newSharded(t, srv, "tp", 4)
	if left, err := s.Left(ctx); err != nil || left != 0 {
		t.Fatalf("Left of missing shards = %d, %v; want 0", left, err)
	}
	if _, err := s.Take(ctx, 1); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("Take from missing shards: %v; want ErrSoldOut", err)
	}
	if err := s.Set(ctx, 20); err != nil {
		t.Fatal(err)
	}
	before := levels(t, ctx, s)
	shard, err := s.Take(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	after := levels(t, ctx, s)
	for i := range after {
		want := before[i]
		if i == shard {
			want -= 4
		}
		if after[i] != want {
			t.Fatalf("after Take(4) from shard %d: levels %v, before %v", shard, after, before)
		}
	}
	// A cancelled order goes back where it came from.
	if err := s.Put(ctx, shard, 4); err != nil {
		t.Fatal(err)
	}
	if got := levels(t, ctx, s); !slices.Equal(got, before) {
		t.Fatalf("after Put: levels %v; want %v", got, before)
	}
	// Orders too large for the whole stock take nothing.
	if shard, err := s.Take(ctx, 21); !errors.Is(err, stock.ErrSoldOut) || shard != -1 {
		t.Fatalf("Take(21) = %d, %v; want -1, ErrSoldOut", shard, err)
	}
	if got := levels(t, ctx, s); !slices.Equal(got, before) {
		t.Fatalf("after a refused Take: levels %v; want %v", got, before)
	}
}

// Take starts at a random shard: over many orders every shard serves some.
func TestShardedTakeSpreadsOverShards(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	s := newSharded(t, srv, "random", 4)
	if err := s.Set(ctx, 4000); err != nil {
		t.Fatal(err)
	}
	seen := make([]int, 4)
	for range 200 {
		shard, err := s.Take(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		seen[shard]++
	}
	for i, n := range seen {
		// Each shard is the start of 50 orders on average; none at all has
		// odds of (3/4)^200.
		if n == 0 {
			t.Fatalf("shard %d served no order in 200: %v", i, seen)
		}
	}
}

// A stock spread too thinly for an order on any one shard still serves it,
// gathered in one script, and refuses only what the total cannot cover.
func TestShardedGathersThinStock(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	s := newSharded(t, srv, "thin", 8)
	if err := s.Set(ctx, 8); err != nil { // one unit on each shard
		t.Fatal(err)
	}
	shard, err := s.Take(ctx, 5)
	if err != nil {
		t.Fatalf("Take(5) of 8 units spread 1 per shard: %v", err)
	}
	got := levels(t, ctx, s)
	var left, empty int64
	for _, v := range got {
		left += v
		if v == 0 {
			empty++
		}
	}
	if left != 3 || empty != 5 || got[shard] != 0 {
		t.Fatalf("after Take(5) from shard %d: levels %v; want 5 shards drained, 3 units left", shard, got)
	}
	if _, err := s.Take(ctx, 4); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("Take(4) of 3 units: %v; want ErrSoldOut", err)
	}
	if after := levels(t, ctx, s); !slices.Equal(after, got) {
		t.Fatalf("a refused Take changed levels %v to %v", got, after)
	}
	if _, err := s.Take(ctx, 3); err != nil {
		t.Fatalf("Take(3) of 3 units on 3 shards: %v", err)
	}
	if left, err := s.Left(ctx); err != nil || left != 0 {
		t.Fatalf("Left = %d, %v; want 0", left, err)
	}
}

func TestShardedRebalance(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	s := newSharded(t, srv, "rebalance", 5)
	if err := s.Set(ctx, 100); err != nil {
		t.Fatal(err)
	}
	// Drain some shards more than others.
	for _, kv := range [][2]string{{"{rebalance}:0", "0"}, {"{rebalance}:1", "1"}, {"{rebalance}:2", "40"}, {"{rebalance}:3", "0"}, {"{rebalance}:4", "6"}} {
		srv.MustDo(t, "SET", kv[0], kv[1])
	}
	if err := s.Rebalance(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := levels(t, ctx, s), []int64{10, 10, 9, 9, 9}; !slices.Equal(got, want) {
		t.Fatalf("levels after Rebalance = %v; want %v", got, want)
	}
	// Missing shard keys count as empty and are written.
	srv.MustDo(t, "DEL", "{rebalance}:0", "{rebalance}:1")
	if err := s.Rebalance(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := levels(t, ctx, s), []int64{6, 6, 5, 5, 5}; !slices.Equal(got, want) {
		t.Fatalf("levels after Rebalance = %v; want %v", got, want)
	}
	if v := srv.MustDo(t, "EXISTS", "{rebalance}:0"); v != "1" {
		t.Fatalf("EXISTS {rebalance}:0 = %q after Rebalance", v)
	}
	// Large totals are written as plain integers.
	big := int64(stock.MaxQuantity - 3)
	if err := s.Set(ctx, big); err != nil {
		t.Fatal(err)
	}
	srv.MustDo(t, "SET", "{rebalance}:4", "0")
	if err := s.Rebalance(ctx); err != nil {
		t.Fatal(err)
	}
	got := levels(t, ctx, s)
	var sum int64
	for _, v := range got {
		sum += v
	}
	if sum != big-big/5 || slices.Max(got)-slices.Min(got) > 1 {
		t.Fatalf("levels after Rebalance of %d = %v (sum %d)", big-big/5, got, sum)
	}
}

// A shard holding something other than an integer is an error, not a sale.
func TestShardedCorruptShard(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	s := newSharded(t, srv, "corrupt", 2)
	srv.MustDo(t, "SET", "{corrupt}:0", "many")
	srv.MustDo(t, "SET", "{corrupt}:1", "many")
	for name, err := range map[string]error{
		"Take":      func() error { _, err := s.Take(ctx, 1); return err }(),
		"Rebalance": s.Rebalance(ctx),
		"Left":      func() error { _, err := s.Left(ctx); return err }(),
	} {
		if err == nil || errors.Is(err, stock.ErrSoldOut) {
			t.Errorf("%s on a corrupt shard: %v; want an error other than ErrSoldOut", name, err)
		}
	}
}

// On a Redis Cluster every shard is in one slot, so the scripts run there
// unchanged, also for keys with braces of their own or a leading '}'.
func TestShardedOnCluster(t *testing.T) {
	cl := testserver.StartRedisCluster(t)
	ctx := ctxFor(t, 20*time.Second)
	// One seed address: with several, rueidis keeps a surplus connection for
	// five seconds after learning the topology, on a timer the leak check
	// would see.
	client := redisClient(t, cl.Addrs()[0])
	for _, key := range []string{"sale:{w1}:p9", "}odd", `\odd`, "plain"} {
		s, err := stock.NewSharded(client, key, 16)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Set(ctx, 33); err != nil {
			t.Fatalf("%q: Set: %v", key, err)
		}
		if _, err := s.Take(ctx, 20); err != nil {
			t.Fatalf("%q: Take: %v", key, err)
		}
		if err := s.Rebalance(ctx); err != nil {
			t.Fatalf("%q: Rebalance: %v", key, err)
		}
		if left, err := s.Left(ctx); err != nil || left != 13 {
			t.Fatalf("%q: Left = %d, %v; want 13", key, left, err)
		}
	}
	// '}odd' and '\odd' must not share keys.
	a, _ := stock.NewSharded(client, "}odd", 16)
	b, _ := stock.NewSharded(client, `\odd`, 16)
	if err := a.Set(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if left, err := b.Left(ctx); err != nil || left != 13 {
		t.Fatalf(`Left of \odd after Set(0) on }odd = %d, %v; want 13`, left, err)
	}
}

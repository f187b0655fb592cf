package stock_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/stock"
)

// pg is the package's one PostgreSQL server, started by TestMain: initdb
// costs a second or two. Tests and benchmarks use distinct row ids.
var pg *testserver.Postgres

func TestMain(m *testing.M) {
	testserver.Main(m, testserver.SharedPostgres(&pg), testserver.Before(migrate))
}

func migrate() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	return stock.Migrate(ctx, pool)
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// redisClient returns a rueidis client of the test's own, closed when it
// ends.
func redisClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// pgPool returns a pool of up to conns connections, closed when the test
// ends.
func pgPool(t testing.TB, conns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// The flash sale (turnstile demo flash-sale): 3,847 orders of one unit for 1,000 units.
const (
	saleUnits  = 1000
	saleOrders = 3847
)

// sale counts the outcomes of concurrent orders.
type sale struct {
	sold, soldOut, conflicts, failed int64
	firstErr                         error
}

// runSale places orders concurrently, one goroutine each, released
// together. order(i) places order i once; an order that gets ErrConflict
// is placed again, as a shopper would retry it.
func runSale(orders int, order func(i int) error) *sale {
	var (
		s     sale
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range orders {
		wg.Go(func() {
			<-start
			for {
				err := order(i)
				mu.Lock()
				switch {
				case err == nil:
					s.sold++
				case errors.Is(err, stock.ErrSoldOut):
					s.soldOut++
				case errors.Is(err, stock.ErrConflict):
					s.conflicts++
				default:
					s.failed++
					if s.firstErr == nil {
						s.firstErr = err
					}
				}
				mu.Unlock()
				if !errors.Is(err, stock.ErrConflict) {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return &s
}

// check fails the test unless exactly units orders succeeded and the rest
// were sold out.
func (s *sale) check(t *testing.T, units, orders int64) {
	t.Helper()
	if s.failed > 0 {
		t.Fatalf("%d orders failed, first: %v", s.failed, s.firstErr)
	}
	if s.sold != units || s.soldOut != orders-units {
		t.Fatalf("sold %d, sold out %d; want %d and %d", s.sold, s.soldOut, units, orders-units)
	}
}

// sampler reads a stock level over and over while a sale runs and keeps
// the lowest value read.
type sampler struct {
	stop, done chan struct{}
	low        int64
	samples    int
	err        error
}

func startSampler(ctx context.Context, read func(context.Context) (int64, error)) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), low: math.MaxInt64}
	go func() {
		defer close(s.done)
		for {
			v, err := read(ctx)
			if err != nil {
				s.err = err
				return
			}
			s.low = min(s.low, v)
			s.samples++
			select {
			case <-s.stop:
				return
			default:
			}
		}
	}()
	return s
}

// finish stops the sampler and returns the lowest value it read.
func (s *sampler) finish(t *testing.T) int64 {
	t.Helper()
	close(s.stop)
	<-s.done
	if s.err != nil {
		t.Fatalf("sampler: %v", s.err)
	}
	return s.low
}

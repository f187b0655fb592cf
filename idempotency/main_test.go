package idempotency_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/idempotency"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// The package's servers, started once by TestMain: initdb alone costs a
// second or two. Every test uses keys of its own.
var (
	pgSrv    *testserver.Postgres
	redisSrv *redisproc.Server
)

func TestMain(m *testing.M) {
	runChild()
	testserver.Main(m, testserver.SharedPostgres(&pgSrv), testserver.SharedRedis(&redisSrv), testserver.Before(migrate))
}

func migrate() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgSrv.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	return idempotency.Migrate(ctx, pool)
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// run tells the keys of one test process from those of earlier runs
// (go test -count) on the same server.
var run0 = time.Now().UnixNano()

// keySeq makes every key a test asks for its own.
var keySeq atomic.Int64

// key is a request key of the test's own.
func key(t testing.TB, suffix string) string {
	return fmt.Sprintf("%s:%s:%d-%d", strings.ReplaceAll(t.Name(), "/", ":"), suffix, run0, keySeq.Add(1))
}

func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctxFor(t, 10*time.Second), pgSrv.URL())
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newRueidis(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisSrv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// kind is one Store implementation under test.
type kind struct {
	name string
	// open returns a store of this kind; stores opened by one test share
	// their data (the same server, or the same Memory).
	open func(t testing.TB, opts ...idempotency.Option) idempotency.Store
}

// kinds returns the three stores. Memory stores opened within one test
// share one map, as Redis and Postgres stores share one server: the
// options apply per store, so a test may open a partitioned or patient
// store beside a plain one.
func kinds() []kind {
	return []kind{
		{"memory", func(t testing.TB, opts ...idempotency.Option) idempotency.Store {
			return sharedMemory(t, opts...)
		}},
		{"redis", func(t testing.TB, opts ...idempotency.Option) idempotency.Store {
			s, err := idempotency.NewRedis(newRueidis(t), opts...)
			if err != nil {
				t.Fatalf("NewRedis: %v", err)
			}
			return s
		}},
		{"postgres", func(t testing.TB, opts ...idempotency.Option) idempotency.Store {
			s, err := idempotency.NewPostgres(newPool(t), opts...)
			if err != nil {
				t.Fatalf("NewPostgres: %v", err)
			}
			return s
		}},
	}
}

// forEach runs test once per store kind, in parallel subtests.
func forEach(t *testing.T, test func(t *testing.T, k kind)) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			test(t, k)
		})
	}
}

// memories holds each test's Memory, so that the stores a test opens
// share their requests.
var memories sync.Map // test name → *idempotency.Memory

func sharedMemory(t testing.TB, opts ...idempotency.Option) idempotency.Store {
	base, _ := memories.LoadOrStore(t.Name(), idempotency.NewMemory())
	return base.(*idempotency.Memory).With(opts...)
}

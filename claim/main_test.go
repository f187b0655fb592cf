package claim_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/claim"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// The package's servers, started by TestMain and shared by its tests,
// which use distinct codes, queues and key prefixes.
var (
	pg  *testserver.Postgres
	my  *mysqlproc.Server
	rds *redisproc.Server
)

func TestMain(m *testing.M) {
	testserver.Main(m,
		testserver.SharedPostgres(&pg),
		testserver.SharedMySQL(&my),
		testserver.SharedRedis(&rds),
		testserver.Before(migrate))
}

func migrate() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := claim.Migrate(ctx, pool); err != nil {
		return err
	}
	db, err := openMySQL(4)
	if err != nil {
		return err
	}
	defer db.Close()
	return claim.MigrateMySQL(ctx, db)
}

// unique returns name with a suffix of its own, so that the rows and keys
// of a test run (-count) are apart from those of the runs before it on the
// same servers.
func unique(name string) string {
	return name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

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

func openMySQL(conns int) (*sql.DB, error) {
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", my.Addr()
	cfg.User, cfg.Passwd, cfg.DBName = mysqlproc.User, mysqlproc.Password, mysqlproc.Database
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// mysqlDB returns a database handle of up to conns connections, closed
// when the test ends.
func mysqlDB(t testing.TB, conns int) *sql.DB {
	t.Helper()
	db, err := openMySQL(conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// redisClient returns a rueidis client with connections of its own,
// closed when the test ends.
func redisClient(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rds.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// couponStores are the stores coupons are tested on. connect returns a
// Coupons over connections of its own, as a separate service instance
// would have; prefix keeps a test's Redis keys apart.
var couponStores = []struct {
	name    string
	connect func(t testing.TB, prefix string) claim.Coupons
}{
	{"Postgres", func(t testing.TB, _ string) claim.Coupons {
		c, err := claim.NewPostgresCoupons(pgPool(t, 2))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}},
	{"MySQL", func(t testing.TB, _ string) claim.Coupons {
		c, err := claim.NewMySQLCoupons(mysqlDB(t, 2))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}},
	{"Redis", func(t testing.TB, prefix string) claim.Coupons {
		c, err := claim.NewRedisCoupons(redisClient(t), prefix)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}},
}

// jobStores are the databases job queues are tested on; connect returns a
// queue over connections of its own.
var jobStores = []struct {
	name    string
	connect func(t testing.TB, queue string, opts ...claim.JobsOption) claim.Jobs
}{
	{"Postgres", func(t testing.TB, queue string, opts ...claim.JobsOption) claim.Jobs {
		q, err := claim.NewPostgresJobs(pgPool(t, 2), queue, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}},
	{"MySQL", func(t testing.TB, queue string, opts ...claim.JobsOption) claim.Jobs {
		q, err := claim.NewMySQLJobs(mysqlDB(t, 2), queue, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}},
}

// exampleDatabaseURL is the PostgreSQL the examples run on: the tests'
// own server.
func exampleDatabaseURL() string { return pg.URL() }

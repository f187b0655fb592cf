package outbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/internal/kafkatest"
	"github.com/turnstilelock/turnstile/events/outbox"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// srv is the package's one PostgreSQL server, started by TestMain; each
// test has a database of its own on it.
var srv *testserver.Postgres

// Environment of the relay child process (TestRelayKilled).
const (
	envChildDB    = "TURNSTILE_OUTBOX_CHILD_DB"
	envChildKafka = "TURNSTILE_OUTBOX_CHILD_KAFKA"
	envChildBatch = "TURNSTILE_OUTBOX_CHILD_BATCH"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChildDB) != "" {
		if err := runChild(); err != nil {
			fmt.Fprintln(os.Stderr, "outbox child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testserver.Main(m, testserver.SharedPostgres(&srv))
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

var dbSeq atomic.Int64

// createDB creates an empty database (not migrated) for the test and
// returns its URL and a pool on it, closed when the test ends.
func createDB(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := ctxFor(t, 20*time.Second)
	admin, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("outbox_%d_%d", os.Getpid(), dbSeq.Add(1))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	url := "postgres://postgres@" + srv.Addr() + "/" + name + "?sslmode=disable"
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return url, pool
}

// newDB creates a database for the test, migrated, and returns its URL
// and a pool on it, closed when the test ends.
func newDB(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	url, pool := createDB(t)
	if err := outbox.Migrate(ctxFor(t, 20*time.Second), pool); err != nil {
		t.Fatal(err)
	}
	return url, pool
}

// startKafka runs an in-process Kafka cluster with the events topic in
// 8 partitions, closed when the test ends.
func startKafka(t testing.TB) *kfake.Cluster { return kafkatest.Start(t, 8) }

// runChild is a relay process whose publisher sends the first half of
// its first batch to Kafka, reports the ids it sent on stdout, and then
// hangs until it is killed.
func runChild() error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(envChildDB))
	if err != nil {
		return err
	}
	defer pool.Close()
	k, err := events.NewKafka(strings.Split(os.Getenv(envChildKafka), ","))
	if err != nil {
		return err
	}
	defer k.Close()
	var batch int
	if _, err := fmt.Sscan(os.Getenv(envChildBatch), &batch); err != nil {
		return err
	}
	relay, err := outbox.NewRelay(pool, hangingPublisher{k}, outbox.WithBatchSize(batch))
	if err != nil {
		return err
	}
	return relay.Run(ctx)
}

type hangingPublisher struct{ k *events.Kafka }

func (p hangingPublisher) Publish(ctx context.Context, evs ...events.Event) error {
	half := evs[:len(evs)/2]
	if err := p.k.Publish(ctx, half...); err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "claimed %d published", len(evs))
	for _, ev := range half {
		fmt.Fprintf(w, " %s", ev.ID)
	}
	fmt.Fprintln(w)
	if err := w.Flush(); err != nil {
		return err
	}
	time.Sleep(time.Hour) // hangs here, holding the batch, until killed
	return ctx.Err()
}

// consume reads n records of the events topic from its start.
func consume(t testing.TB, seeds []string, n int) []events.Event {
	t.Helper()
	var out []events.Event
	kafkatest.Consume(t, seeds, n, func(r *kgo.Record) {
		ev := events.Event{}
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatalf("record %s: %v", r.Value, err)
		}
		if string(r.Key) != ev.Key {
			t.Fatalf("record key %q, event key %q", r.Key, ev.Key)
		}
		out = append(out, ev)
	})
	return out
}

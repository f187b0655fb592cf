package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/outbox"
)

// logBuffer is a slog text handler's output, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// addRaw inserts a row as something other than Add might (a bug, a hand
// edit, a writer of another version), and returns its id.
func addRaw(t testing.TB, pool *pgxpool.Pool, eventID, key, payload string) int64 {
	t.Helper()
	var id int64
	err := pool.QueryRow(ctxFor(t, 10*time.Second),
		`INSERT INTO turnstile_outbox (event_id, key, payload) VALUES ($1, $2, $3::jsonb) RETURNING id`,
		eventID, key, payload).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func add(t testing.TB, pool *pgxpool.Pool, evs ...events.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := outbox.Add(ctxFor(t, 10*time.Second), pool, ev); err != nil {
			t.Fatal(err)
		}
	}
}

// deadRow is a row of turnstile_outbox_dead.
type deadRow struct {
	id            int64
	eventID, key  string
	reason        string
	payload       []byte
	created, dead time.Time
}

func deadRows(t testing.TB, pool *pgxpool.Pool) []deadRow {
	t.Helper()
	rows, err := pool.Query(ctxFor(t, 10*time.Second),
		`SELECT id, event_id, key, reason, payload, created_at, dead_at FROM turnstile_outbox_dead ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []deadRow
	for rows.Next() {
		var d deadRow
		if err := rows.Scan(&d.id, &d.eventID, &d.key, &d.reason, &d.payload, &d.created, &d.dead); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// deadMetric reads turnstile_outbox_dead_lettered_total from reg.
func deadMetric(t testing.TB, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "turnstile_outbox_dead_lettered_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("turnstile_outbox_dead_lettered_total not registered")
	return 0
}

// TestPoisonRowBatch5: with batches of 5, an undecodable row followed by
// four rows of its key (so that the key alone fills a batch) does not
// stop the relay: the row goes to the dead-letter table, with one log
// line and the metric counting it; the four later rows of its key and
// every row of the other keys are published, each once, each key in the
// order it was added.
func TestPoisonRowBatch5(t *testing.T) {
	_, pool := newDB(t)
	ctx := ctxFor(t, 30*time.Second)
	poison := addRaw(t, pool, "poison", "lock:bad", `{"version": 7, "key": "lock:bad"}`)
	var want []events.Event
	for i := range 4 {
		ev := events.New(roundTypes[i%len(roundTypes)], "lock:bad")
		ev.Token = uint64(i + 1)
		want = append(want, ev)
	}
	add(t, pool, want...)
	want = append(want, fill(t, pool, 6, 2)...)

	var logs logBuffer
	reg := prometheus.NewRegistry()
	var mp memPublisher
	r, err := outbox.NewRelay(pool, &mp, outbox.WithBatchSize(5), outbox.WithLogger(logs.logger()), outbox.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	// 17 rows in batches of 5: four runs, or five if the dead row costs
	// one; ten are plenty.
	for i := 0; i < 10; i++ {
		if n, err := r.RunOnce(ctx); err != nil {
			t.Fatalf("RunOnce %d = %d, %v", i+1, n, err)
		}
	}
	if n, err := outbox.Pending(ctx, pool); n != 0 || err != nil {
		t.Fatalf("after 10 batches of 5, Pending = %d, %v; want 0 (%d of %d events published)", n, err, len(mp.evs), len(want))
	}
	checkDelivery(t, want, mp.evs, nil)

	dead := deadRows(t, pool)
	if len(dead) != 1 || dead[0].id != poison || dead[0].eventID != "poison" || dead[0].key != "lock:bad" {
		t.Fatalf("dead-letter table holds %+v, want the row %d of lock:bad", dead, poison)
	}
	if !strings.Contains(dead[0].reason, `field "version"`) || !strings.Contains(dead[0].reason, "version 7") {
		t.Fatalf("dead row's reason %q does not name the field at fault", dead[0].reason)
	}
	var got map[string]any
	if err := json.Unmarshal(dead[0].payload, &got); err != nil || got["version"] != float64(7) {
		t.Fatalf("dead row's payload %s, %v: want the row's own", dead[0].payload, err)
	}
	if r.DeadLettered() != 1 {
		t.Fatalf("DeadLettered = %d, want 1", r.DeadLettered())
	}
	if m := deadMetric(t, reg); m != 1 {
		t.Fatalf("turnstile_outbox_dead_lettered_total = %v, want 1", m)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], fmt.Sprintf("id=%d", poison)) ||
		!strings.Contains(lines[0], "turnstile_outbox_dead") || !strings.Contains(lines[0], "key=lock:bad") {
		t.Fatalf("log:\n%s\nwant one error line naming row %d, its key and the dead-letter table", logs.String(), poison)
	}
}

// failPublisher refuses every batch.
type failPublisher struct{}

func (failPublisher) Publish(context.Context, ...events.Event) error {
	return errors.New("broker down")
}

// TestPoisonRowPublishFails: when the batch's publish fails, the
// dead-lettering of its undecodable row is given back with the rest, and
// neither logged nor counted; the next relay moves it, once.
func TestPoisonRowPublishFails(t *testing.T) {
	_, pool := newDB(t)
	ctx := ctxFor(t, 20*time.Second)
	addRaw(t, pool, "poison", "lock:a", `[]`)
	good := events.New(events.TypeAcquired, "lock:a")
	add(t, pool, good)

	var logs logBuffer
	reg := prometheus.NewRegistry()
	r, err := outbox.NewRelay(pool, failPublisher{}, outbox.WithLogger(logs.logger()), outbox.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctx); n != 0 || err == nil {
		t.Fatalf("RunOnce with a failing publisher = %d, %v; want an error", n, err)
	}
	if d := deadRows(t, pool); len(d) != 0 {
		t.Fatalf("a failed batch dead-lettered %+v", d)
	}
	waitPending(t, pool, 2)
	if logs.String() != "" || r.DeadLettered() != 0 || deadMetric(t, reg) != 0 {
		t.Fatalf("a failed batch logged %q, counted %d (metric %v)", logs.String(), r.DeadLettered(), deadMetric(t, reg))
	}

	// A second relay in the same process shares the counter.
	var mp memPublisher
	r2, err := outbox.NewRelay(pool, &mp, outbox.WithLogger(logs.logger()), outbox.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r2.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v; want 1, nil", n, err)
	}
	if len(mp.evs) != 1 || mp.evs[0].ID != good.ID {
		t.Fatalf("published %+v, want %s", mp.evs, good.ID)
	}
	d := deadRows(t, pool)
	if len(d) != 1 || !strings.Contains(d[0].reason, "not a JSON object") {
		t.Fatalf("dead-letter table holds %+v, want the row with reason \"not a JSON object\"", d)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || deadMetric(t, reg) != 1 {
		t.Fatalf("%d log lines, metric %v; want 1 and 1:\n%s", n, deadMetric(t, reg), logs.String())
	}
}

// TestRequeue: a dead-lettered row is refused by Requeue while its
// payload is still bad, with the field at fault named; once fixed, it
// goes back to the outbox behind the events its key has there, and is
// published.
func TestRequeue(t *testing.T) {
	_, pool := newDB(t)
	ctx := ctxFor(t, 20*time.Second)
	lost := events.New(events.TypeLost, "lock:other") // the event, written under the wrong key
	b, err := json.Marshal(lost)
	if err != nil {
		t.Fatal(err)
	}
	id := addRaw(t, pool, lost.ID, "lock:k", string(b))
	later := events.New(events.TypeAcquired, "lock:k")
	add(t, pool, later)

	var mp memPublisher
	r, err := outbox.NewRelay(pool, &mp, outbox.WithLogger(discard()))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v; want 1, nil", n, err)
	}
	if d := deadRows(t, pool); len(d) != 1 || d[0].id != id || !strings.Contains(d[0].reason, `field "key"`) {
		t.Fatalf("dead-letter table holds %+v, want row %d, field \"key\" at fault", d, id)
	}

	err = outbox.Requeue(ctx, pool, id)
	if !errors.Is(err, events.ErrInvalidEvent) || !strings.Contains(err.Error(), `field "key"`) {
		t.Fatalf("Requeue of a row still bad = %v, want ErrInvalidEvent naming field \"key\"", err)
	}
	if err := outbox.Requeue(ctx, pool, id+100); !errors.Is(err, outbox.ErrNotDead) {
		t.Fatalf("Requeue of no dead row = %v, want ErrNotDead", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE turnstile_outbox_dead SET payload = jsonb_set(payload, '{key}', '"lock:k"') WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Requeue(ctx, pool, id); err != nil {
		t.Fatalf("Requeue of the fixed row: %v", err)
	}
	if err := outbox.Requeue(ctx, pool, id); !errors.Is(err, outbox.ErrNotDead) {
		t.Fatalf("second Requeue = %v, want ErrNotDead", err)
	}
	if d := deadRows(t, pool); len(d) != 0 {
		t.Fatalf("dead-letter table still holds %+v", d)
	}
	if n, err := r.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce after Requeue = %d, %v; want 1, nil", n, err)
	}
	fixed := lost
	fixed.Key = "lock:k"
	if len(mp.evs) != 2 || mp.evs[0].ID != later.ID || mp.evs[1].ID != fixed.ID || mp.evs[1].Key != "lock:k" {
		t.Fatalf("published %+v, want %s then the requeued %s", mp.evs, later.ID, fixed.ID)
	}
	var nilPool *pgxpool.Pool
	if err := outbox.Requeue(ctx, nilPool, id); !errors.Is(err, outbox.ErrNilDB) {
		t.Fatalf("Requeue with a nil pool = %v, want ErrNilDB", err)
	}
}

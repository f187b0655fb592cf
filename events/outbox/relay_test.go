package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/outbox"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

var roundTypes = []string{events.TypeAcquired, events.TypeExtended, events.TypeReleased}

// fill adds rounds events for each of keys keys, round by round (so one
// key's rows are far apart in the table), 100 per transaction, and
// returns them in the order they were added.
func fill(t testing.TB, pool *pgxpool.Pool, keys, rounds int) []events.Event {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	var all []events.Event
	for r := range rounds {
		for i := range keys {
			ev := events.New(roundTypes[r%len(roundTypes)], fmt.Sprintf("lock:item:%d", i))
			ev.Owner, ev.Token = "host-1/owner", uint64(r+1)
			all = append(all, ev)
		}
	}
	for start := 0; start < len(all); start += 100 {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range all[start:min(start+100, len(all))] {
			if err := outbox.Add(ctx, tx, ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// waitPending waits until the outbox holds want unsent rows.
func waitPending(t testing.TB, pool *pgxpool.Pool, want int64) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for {
		n, err := outbox.Pending(ctx, pool)
		if err != nil {
			t.Fatalf("waiting for %d pending rows: %v", want, err)
		}
		if n == want {
			return
		}
		if n < want {
			t.Fatalf("%d rows pending, want %d: rows were sent that must wait", n, want)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d rows pending, want %d", n, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// relays runs n relays, each with a Kafka publisher of its own, until
// stop is called; stop checks that each Run ended with the context, and
// returns how many records they published together.
func relays(t *testing.T, pool *pgxpool.Pool, seeds []string, n int, opts ...outbox.Option) (stop func() uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, n)
	var pubs []*events.Kafka
	var wg sync.WaitGroup
	for range n {
		k, err := events.NewKafka(seeds)
		if err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, k)
		t.Cleanup(func() { _ = k.Close() })
		r, err := outbox.NewRelay(pool, k, append([]outbox.Option{outbox.WithPollInterval(10 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs <- r.Run(ctx) })
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { cancel(); wg.Wait() }) })
	return func() uint64 {
		once.Do(func() { cancel(); wg.Wait() })
		close(errs)
		for err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		}
		var sum uint64
		for _, k := range pubs {
			if err := k.Close(); err != nil {
				t.Error(err)
			}
			sum += k.Published()
		}
		return sum
	}
}

// checkDelivery checks that got holds every event of want, each exactly
// once except the ids in dup (exactly twice), and that per key the
// first copies come in the order of want.
func checkDelivery(t *testing.T, want, got []events.Event, dup map[string]bool) {
	t.Helper()
	seen := map[string]int{}
	firsts := map[string][]events.Event{} // per key, first copies in order
	for _, ev := range got {
		seen[ev.ID]++
		if seen[ev.ID] == 1 {
			firsts[ev.Key] = append(firsts[ev.Key], ev)
		}
	}
	wantPerKey := map[string][]events.Event{}
	for _, ev := range want {
		wantPerKey[ev.Key] = append(wantPerKey[ev.Key], ev)
		n, ok := seen[ev.ID], dup[ev.ID]
		switch {
		case n == 0:
			t.Fatalf("event %s (%s %s) lost", ev.ID, ev.Type, ev.Key)
		case ok && n != 2:
			t.Fatalf("event %s, published before the relay died, delivered %d times, want 2", ev.ID, n)
		case !ok && n != 1:
			t.Fatalf("event %s delivered %d times", ev.ID, n)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d distinct events delivered, %d added", len(seen), len(want))
	}
	for key, evs := range wantPerKey {
		g := firsts[key]
		for i := range evs {
			if !g[i].Timestamp.Equal(evs[i].Timestamp) {
				t.Fatalf("%s: event %d is %+v", key, i, g[i])
			}
			g[i].Timestamp = evs[i].Timestamp // JSON drops the monotonic clock and zone
			if g[i] != evs[i] {
				t.Fatalf("%s: event %d delivered as %+v, want %+v (order or content)", key, i, g[i], evs[i])
			}
		}
	}
}

// TestRelaysParallel: three relays on 3,000 rows send each exactly once,
// and one key's events in the order they were added.
func TestRelaysParallel(t *testing.T) {
	_, pool := newDB(t)
	cluster := startKafka(t)
	want := fill(t, pool, 1000, 3)
	start := time.Now()
	stop := relays(t, pool, cluster.ListenAddrs(), 3, outbox.WithBatchSize(50))
	waitPending(t, pool, 0)
	t.Logf("3 relays, batches of 50: %d events sent in %v", len(want), time.Since(start))
	published := stop()
	if published != uint64(len(want)) {
		t.Fatalf("relays published %d records for %d rows", published, len(want))
	}
	checkDelivery(t, want, consume(t, cluster.ListenAddrs(), len(want)), nil)
}

// TestRelayKilled: a relay process is SIGKILLed after sending half of its
// batch to Kafka. Until then the two other relays send everything except
// its rows and the later rows of the same keys; after it, its rows come
// back and are sent: nothing lost, the half it sent is delivered twice,
// and per key the first copies are in order.
func TestRelayKilled(t *testing.T) {
	const batch = 40
	url, pool := newDB(t)
	cluster := startKafka(t)
	want := fill(t, pool, 1000, 3)

	dup, kill := startRelayChild(t, url, cluster, batch)
	stop := relays(t, pool, cluster.ListenAddrs(), 2, outbox.WithBatchSize(batch), outbox.WithoutListen())
	// The child holds rows 1..40 (round 1 of keys 0..39); rounds 2 and 3 of
	// those keys must wait for them, and everything else is sent.
	waitPending(t, pool, 3*batch)
	kill()
	waitPending(t, pool, 0)
	published := stop()
	if published != uint64(len(want)) {
		t.Fatalf("surviving relays published %d records for %d rows", published, len(want))
	}
	checkDelivery(t, want, consume(t, cluster.ListenAddrs(), len(want)+len(dup)), dup)
}

// startRelayChild starts a relay in a child process that claims one batch
// of batch rows, publishes half of them and stops there, holding its
// claim. It returns the ids the child published and kill, which SIGKILLs
// the child (also done when the test ends, if kill was not called).
func startRelayChild(t *testing.T, url string, cluster *kfake.Cluster, batch int) (dup map[string]bool, kill func()) {
	t.Helper()
	out, killChild := testserver.StartChild(t, envChildDB+"="+url, envChildKafka+"="+strings.Join(cluster.ListenAddrs(), ","),
		fmt.Sprintf("%s=%d", envChildBatch, batch))
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("relay child: %v", err)
	}
	var claimed int
	if _, err := fmt.Sscanf(line, "claimed %d published", &claimed); err != nil || claimed != batch {
		t.Fatalf("relay child said %q, want a full batch of %d", line, batch)
	}
	dup = map[string]bool{}
	for _, id := range strings.Fields(line)[3:] {
		dup[id] = true
	}
	if len(dup) != batch/2 {
		t.Fatalf("relay child published %d events, want %d", len(dup), batch/2)
	}
	return dup, func() {
		if err := killChild(); err == nil {
			t.Fatal("relay child exited cleanly, want killed")
		}
	}
}

// blockingPublisher blocks until its context ends.
type blockingPublisher struct{ started chan struct{} }

func (p blockingPublisher) Publish(ctx context.Context, evs ...events.Event) error {
	close(p.started)
	<-ctx.Done()
	return ctx.Err()
}

// memPublisher records what it is given.
type memPublisher struct {
	mu  sync.Mutex
	evs []events.Event
}

func (p *memPublisher) Publish(_ context.Context, evs ...events.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evs = append(p.evs, evs...)
	return nil
}

// TestRelayCancelledMidPublish: a relay stopped while its publish is under
// way gives its batch back; another relay sends it.
func TestRelayCancelledMidPublish(t *testing.T) {
	_, pool := newDB(t)
	want := fill(t, pool, 10, 2)
	bp := blockingPublisher{started: make(chan struct{})}
	r, err := outbox.NewRelay(pool, bp)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-bp.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	waitPending(t, pool, int64(len(want)))

	var mp memPublisher
	r2, err := outbox.NewRelay(pool, &mp)
	if err != nil {
		t.Fatal(err)
	}
	n, err := r2.RunOnce(ctxFor(t, 10*time.Second))
	if err != nil || n != len(want) {
		t.Fatalf("RunOnce = %d, %v; want %d, nil", n, err, len(want))
	}
	waitPending(t, pool, 0)
	checkDelivery(t, want, mp.evs, nil)
}

// TestRelayPublishFails: a failed publish marks nothing.
func TestRelayPublishFails(t *testing.T) {
	_, pool := newDB(t)
	want := fill(t, pool, 5, 1)
	// A Kafka publisher on a closed port fails when the claim timeout ends.
	k, err := events.NewKafka([]string{"127.0.0.1:1"}, events.WithCloseTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	r, err := outbox.NewRelay(pool, k, outbox.WithClaimTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctxFor(t, 10*time.Second)); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RunOnce = %d, %v; want 0, context.DeadlineExceeded", n, err)
	}
	waitPending(t, pool, int64(len(want)))
}

func TestRelayNoTable(t *testing.T) {
	_, pool := createDB(t)
	r, err := outbox.NewRelay(pool, &memPublisher{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctxFor(t, 10*time.Second)); !errors.Is(err, outbox.ErrNoTable) {
		t.Fatalf("Run = %v, want ErrNoTable", err)
	}
}

func TestNewRelayInvalid(t *testing.T) {
	_, pool := newDB(t)
	var nilKafka *events.Kafka
	for _, tc := range []struct {
		name string
		pool *pgxpool.Pool
		pub  events.Publisher
		opts []outbox.Option
		want error
	}{
		{"nil pool", nil, &memPublisher{}, nil, outbox.ErrNilDB},
		{"nil publisher", pool, nil, nil, turnstile.ErrInvalidOption},
		{"typed nil publisher", pool, nilKafka, nil, turnstile.ErrInvalidOption},
		{"nil option", pool, &memPublisher{}, []outbox.Option{nil}, turnstile.ErrInvalidOption},
		{"batch 0", pool, &memPublisher{}, []outbox.Option{outbox.WithBatchSize(0)}, turnstile.ErrInvalidOption},
		{"batch too large", pool, &memPublisher{}, []outbox.Option{outbox.WithBatchSize(10001)}, turnstile.ErrInvalidOption},
		{"poll 0", pool, &memPublisher{}, []outbox.Option{outbox.WithPollInterval(0)}, turnstile.ErrInvalidOption},
		{"claim timeout 0", pool, &memPublisher{}, []outbox.Option{outbox.WithClaimTimeout(0)}, turnstile.ErrInvalidOption},
		{"nil logger", pool, &memPublisher{}, []outbox.Option{outbox.WithLogger(nil)}, turnstile.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := outbox.NewRelay(tc.pool, tc.pub, tc.opts...); !errors.Is(err, tc.want) {
				t.Fatalf("NewRelay = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestRelayWokenByNotify: with a poll interval of an hour, events added
// one after another are still sent: the outbox's NOTIFY wakes the relay.
// (Its first look and the one when LISTEN starts can take at most one of
// them.)
func TestRelayWokenByNotify(t *testing.T) {
	_, pool := newDB(t)
	var mp memPublisher
	r, err := outbox.NewRelay(pool, &mp, outbox.WithPollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	}()
	for i := range 4 {
		if err := outbox.Add(ctxFor(t, 10*time.Second), pool, events.New(events.TypeAcquired, fmt.Sprintf("lock:%d", i))); err != nil {
			t.Fatal(err)
		}
		waitPending(t, pool, 0)
	}
	if len(mp.evs) != 4 {
		t.Fatalf("published %d events, want 4", len(mp.evs))
	}
}

package outbox_test

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/outbox"
)

// TestEventTooLarge: an event the broker refuses as too large — larger
// than the topic's max.message.bytes, or than the producer's batch
// limit — would fail every batch it is in, and, being the oldest unsent
// row, it is in every batch: nothing after it would ever be published.
// The relay moves it to the dead-letter table instead, with the reason,
// one error line and the counter, and every other event is published,
// each key in order (the later events of the big one's key too).
func TestEventTooLarge(t *testing.T) {
	_, pool := newDB(t)
	ctx := ctxFor(t, 2*time.Minute)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, events.Topic),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "65536"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	seeds := cluster.ListenAddrs()
	k, err := events.NewKafka(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()

	big := events.New(events.TypeFailed, "lock:big")
	big.Error = incompressible(100 << 10) // over the broker's 64 KiB, compressed or not
	after := events.New(events.TypeAcquired, "lock:big")
	huge := events.New(events.TypeFailed, "lock:huge")
	huge.Error = incompressible(1100 << 10) // over the producer's 1 MB batch too
	add(t, pool, big, after, huge)
	want := append([]events.Event{after}, fill(t, pool, 6, 3)...)

	var logs logBuffer
	reg := prometheus.NewRegistry()
	r, err := outbox.NewRelay(pool, k, outbox.WithBatchSize(10), outbox.WithLogger(logs.logger()), outbox.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	// 21 rows in batches of 10: three runs, or a few more for the two
	// refused; ten are plenty.
	for i := range 10 {
		if n, err := r.RunOnce(ctx); err != nil {
			pending, _ := outbox.Pending(ctx, pool)
			t.Fatalf("RunOnce %d = %d, %v (%d rows still unsent)", i+1, n, err, pending)
		}
	}
	if n, err := outbox.Pending(ctx, pool); n != 0 || err != nil {
		t.Fatalf("Pending = %d, %v; want 0", n, err)
	}
	checkDelivery(t, want, consume(t, seeds, len(want)), nil)

	dead := deadRows(t, pool)
	if len(dead) != 2 || dead[0].eventID != big.ID || dead[1].eventID != huge.ID {
		t.Fatalf("dead-letter table holds %d rows, want the two too large (%s, %s)", len(dead), big.ID, huge.ID)
	}
	for _, d := range dead {
		if !strings.Contains(d.reason, "too large") {
			t.Fatalf("dead row %d's reason %q does not say it was too large", d.id, d.reason)
		}
	}
	if r.DeadLettered() != 2 {
		t.Fatalf("DeadLettered = %d, want 2", r.DeadLettered())
	}
	if m := deadMetric(t, reg); m != 2 {
		t.Fatalf("turnstile_outbox_dead_lettered_total = %v, want 2", m)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var errLines int
	for _, l := range lines {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "too large") && strings.Contains(l, "turnstile_outbox_dead") {
			errLines++
		}
	}
	if errLines != 2 {
		t.Fatalf("log:\n%s\nwant one error line for each row too large", logs.String())
	}
	for _, d := range dead {
		if !strings.Contains(logs.String(), fmt.Sprintf("id=%d", d.id)) {
			t.Fatalf("log:\n%s\nnames no row %d", logs.String(), d.id)
		}
	}
}

// incompressible is n bytes of random text, which the producer's
// compression cannot shrink below the broker's limit.
func incompressible(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(rand.Text())
	}
	return b.String()[:n]
}

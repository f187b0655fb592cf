package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/events"
	consumer "github.com/turnstilelock/turnstile/events/consume"
	"github.com/turnstilelock/turnstile/events/outbox"
)

// appliedLog is an application's storage for the consumer: per key the
// position of the last applied event, and per id how often it was
// applied.
type appliedLog struct {
	mu    sync.Mutex
	pos   map[string]consumer.Position
	times map[string]int
	order map[string][]events.Event
	n     int
}

func (l *appliedLog) apply(_ context.Context, ev events.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pos[ev.Key] = consumer.PositionOf(ev)
	l.times[ev.ID]++
	l.order[ev.Key] = append(l.order[ev.Key], ev)
	l.n++
	return nil
}

func (l *appliedLog) last(_ context.Context, key string) (consumer.Position, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pos[key], nil
}

// TestRelayKilledConsumed: a relay process is SIGKILLed after sending
// half of its batch to Kafka, and the surviving relays send that batch
// again, whole; a consumer of the topic applies every event exactly
// once, each key's in the order they were added, and counts the
// republished half as duplicates.
func TestRelayKilledConsumed(t *testing.T) {
	const batch = 40
	url, pool := newDB(t)
	cluster := startKafka(t)
	want := fill(t, pool, 100, 3)

	dup, kill := startRelayChild(t, url, cluster, batch)
	kill()
	stop := relays(t, pool, cluster.ListenAddrs(), 2, outbox.WithBatchSize(batch), outbox.WithoutListen())
	waitPending(t, pool, 0)
	if published := stop(); published != uint64(len(want)) {
		t.Fatalf("surviving relays published %d records for %d rows", published, len(want))
	}

	l := &appliedLog{pos: map[string]consumer.Position{}, times: map[string]int{}, order: map[string][]events.Event{}}
	c, err := consumer.New(cluster.ListenAddrs(), "relay-killed", l.last)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), l.apply) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := c.Stats()
		if st.Applied+st.Duplicates+st.Stale+st.Poison >= uint64(len(want)+len(dup)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumed %+v of %d records", st, len(want)+len(dup))
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Close()
	if err := <-done; !errors.Is(err, consumer.ErrClosed) {
		t.Fatalf("Run = %v, want ErrClosed", err)
	}
	if st := c.Stats(); st != (consumer.Stats{Applied: uint64(len(want)), Duplicates: uint64(len(dup))}) {
		t.Fatalf("stats %+v; want %d applied, %d duplicates", st, len(want), len(dup))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	perKey := map[string][]events.Event{}
	for _, ev := range want {
		if n := l.times[ev.ID]; n != 1 {
			t.Fatalf("event %s (%s %s) applied %d times, want once", ev.ID, ev.Type, ev.Key, n)
		}
		perKey[ev.Key] = append(perKey[ev.Key], ev)
	}
	if l.n != len(want) {
		t.Fatalf("%d events applied, want %d", l.n, len(want))
	}
	for key, evs := range perKey {
		for i, ev := range l.order[key] {
			if ev.ID != evs[i].ID {
				t.Fatalf("%s: event %d applied is %s %d, want %s %d", key, i, ev.Type, ev.Token, evs[i].Type, evs[i].Token)
			}
		}
	}
}

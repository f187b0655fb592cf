package events_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/turnstilelock/turnstile/events"
)

// TestPublishTooLarge: an event over the broker's message.max.bytes
// fails Publish with an error that matches ErrTooLarge, and the
// *PublishError says which events of the call the broker acknowledged,
// in the order given (the broker answers partitions in any order).
func TestPublishTooLarge(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, events.Topic),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "65536"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	k := newKafka(t, cluster.ListenAddrs())
	ctx := ctxFor(t, 30*time.Second)

	var b strings.Builder
	for b.Len() < 100<<10 {
		b.WriteString(rand.Text()) // incompressible: compression cannot bring it under the limit
	}
	big := events.New(events.TypeFailed, "lock:big")
	big.Error = b.String()
	evs := []events.Event{big}
	for i := range 12 {
		evs = append(evs, events.New(events.TypeAcquired, "lock:small:"+string(rune('a'+i))))
	}
	err = k.Publish(ctx, evs...)
	if !errors.Is(err, events.ErrTooLarge) {
		t.Fatalf("Publish of an event over message.max.bytes = %v, want ErrTooLarge", err)
	}
	pe, ok := errors.AsType[*events.PublishError](err)
	if !ok || len(pe.Acked) != len(evs) || pe.Acked[0] {
		t.Fatalf("Publish's error %v: want a *PublishError with %d acknowledgements, the first false", err, len(evs))
	}
	acked := map[string]bool{}
	for i, a := range pe.Acked {
		if a {
			acked[evs[i].ID] = true
		}
	}
	if len(acked) == 0 || uint64(len(acked)) != k.Published() {
		t.Fatalf("%d events acknowledged, Published = %d: want the same, above 0", len(acked), k.Published())
	}
	for _, r := range consume(t, cluster.ListenAddrs(), len(acked)) {
		if !acked[r.ev.ID] {
			t.Fatalf("event %s of %s is in the topic but not acknowledged", r.ev.ID, r.key)
		}
	}
	if err := k.Publish(ctx, big); !errors.Is(err, events.ErrTooLarge) {
		t.Fatalf("Publish of the big event alone = %v, want ErrTooLarge", err)
	}
	if err := k.Publish(ctx, evs[1]); err != nil || errors.Is(err, events.ErrTooLarge) {
		t.Fatalf("Publish of a small event = %v", err)
	}
}

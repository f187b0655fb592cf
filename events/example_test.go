package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/memory"
)

// A Client whose lock events go to Kafka (here an in-process cluster),
// and a consumer reading them back.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, events.Topic))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	pub, err := events.NewKafka(cluster.ListenAddrs())
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	c, err := turnstile.New(memory.New(), turnstile.WithObserver(pub))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	lease, err := c.Acquire(ctx, "lock:order:42")
	if err != nil {
		log.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	if err := pub.Flush(ctx); err != nil {
		log.Fatal(err)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.ConsumeTopics(events.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()
	for n := 0; n < 2; {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var ev events.Event
			if err := json.Unmarshal(r.Value, &ev); err != nil {
				log.Fatal(err)
			}
			fmt.Println(string(r.Key), ev.Version, ev.Type, ev.Token)
			n++
		})
	}
	fmt.Println("dropped:", pub.Dropped())
	// Output:
	// lock:order:42 1 ACQUIRED 1
	// lock:order:42 1 RELEASED 1
	// dropped: 0
}

package consume_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/consume"
	"github.com/turnstilelock/turnstile/memory"
)

// A service that keeps who holds each lock, fed by the lock events of a
// Client (here with an in-process Kafka cluster). Its storage is a map;
// a real one stores the position in the same transaction as the change.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, events.Topic))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	// The publishing side: a Client whose events go to Kafka.
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

	// The consuming side: holders and positions, kept together.
	var (
		mu        sync.Mutex
		holders   = map[string]string{}
		positions = map[string]consume.Position{}
		done      = make(chan struct{})
	)
	lastApplied := func(_ context.Context, key string) (consume.Position, error) {
		mu.Lock()
		defer mu.Unlock()
		return positions[key], nil
	}
	apply := func(_ context.Context, ev events.Event) error {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Type {
		case events.TypeAcquired:
			holders[ev.Key] = ev.Owner
		case events.TypeReleased, events.TypeLost, events.TypeForceReleased:
			delete(holders, ev.Key)
		}
		positions[ev.Key] = consume.PositionOf(ev)
		fmt.Println(ev.Key, ev.Type, ev.Token)
		if ev.Type == events.TypeReleased {
			close(done)
		}
		return nil
	}

	consumer, err := consume.New(cluster.ListenAddrs(), "holders", lastApplied)
	if err != nil {
		log.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- consumer.Run(ctx, apply) }()
	<-done
	consumer.Close()
	fmt.Println("Run:", <-stopped)
	fmt.Printf("%+v\n", consumer.Stats())
	fmt.Println("holders:", len(holders))
	// Output:
	// lock:order:42 ACQUIRED 1
	// lock:order:42 RELEASED 1
	// Run: turnstile/events/consume: consumer closed
	// {Applied:2 Duplicates:0 Stale:0 Poison:0}
	// holders: 0
}

// Package kafkatest is what the events module's tests share about Kafka:
// an in-process cluster with the events topic, a reader of the topic, and
// lock activity to publish.
package kafkatest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
)

// Start runs an in-process Kafka cluster of one broker with the events
// topic in partitions partitions, closed when the test ends.
func Start(t testing.TB, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, events.Topic))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Consume reads n records of the events topic from its start, within 30
// s, with a client of seeds and opts, and passes each to each.
func Consume(t testing.TB, seeds []string, n int, each func(*kgo.Record), opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(events.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for read := 0; read < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", read, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			read++
			each(r)
		})
	}
}

// LockAll acquires and releases the keys prefix:0 … prefix:keys−1 rounds
// times each, every key in its own goroutine, and returns the first
// error. hold, if not nil, runs in each lease before its release.
func LockAll(ctx context.Context, c *turnstile.Client, prefix string, keys, rounds int, hold func(context.Context, *turnstile.Lease) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, keys)
	for i := range keys {
		wg.Go(func() {
			for range rounds {
				l, err := c.Acquire(ctx, fmt.Sprintf("%s:%d", prefix, i))
				if err == nil && hold != nil {
					err = hold(ctx, l)
				}
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

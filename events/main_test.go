package events_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// startKafka runs an in-process Kafka cluster with the events topic in
// partitions partitions, closed when the test ends.
func startKafka(t testing.TB, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, events.Topic))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// record is one consumed record, decoded.
type record struct {
	key       string
	partition int32
	ev        events.Event
}

// consume reads n records of the events topic from its start.
func consume(t testing.TB, seeds []string, n int) []record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(events.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxFor(t, 30*time.Second)
	var out []record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, record{key: string(r.Key), partition: r.Partition, ev: decode(t, r.Value)})
		})
	}
	return out
}

package events_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/internal/kafkatest"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// startKafka runs an in-process Kafka cluster with the events topic in
// partitions partitions, closed when the test ends.
var startKafka = kafkatest.Start

// record is one consumed record, decoded.
type record struct {
	key       string
	partition int32
	ev        events.Event
}

// consume reads n records of the events topic from its start.
func consume(t testing.TB, seeds []string, n int) []record {
	t.Helper()
	var out []record
	kafkatest.Consume(t, seeds, n, func(r *kgo.Record) {
		out = append(out, record{key: string(r.Key), partition: r.Partition, ev: decode(t, r.Value)})
	})
	return out
}

package events_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/internal/kafkatest"
	"github.com/turnstilelock/turnstile/memory"
)

func newKafka(t testing.TB, seeds []string, opts ...events.Option) *events.Kafka {
	t.Helper()
	k, err := events.NewKafka(seeds, opts...)
	if err != nil {
		t.Fatalf("NewKafka: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func newClient(t testing.TB, obs turnstile.Observer) *turnstile.Client {
	t.Helper()
	c, err := turnstile.New(memory.New(), turnstile.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockAll acquires and releases each of keys rounds times, every key in
// its own goroutine, and returns the first error.
func lockAll(ctx context.Context, c *turnstile.Client, keys, rounds int) error {
	return kafkatest.LockAll(ctx, c, "lock:item", keys, rounds, nil)
}

// TestPerKeyOrder: a Client with the publisher as observer locks 1,000
// keys concurrently, twice each; the topic holds, per key, ACQUIRED then
// RELEASED of one lease, then the same for the next lease.
func TestPerKeyOrder(t *testing.T) {
	const keys, rounds = 1000, 2
	cluster := startKafka(t, 8)
	k := newKafka(t, cluster.ListenAddrs())
	c := newClient(t, k)
	if err := lockAll(ctxFor(t, 30*time.Second), c, keys, rounds); err != nil {
		t.Fatal(err)
	}
	if err := k.Flush(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, want := k.Published(), uint64(keys*rounds*2); got != want || k.Dropped() != 0 {
		t.Fatalf("published %d, dropped %d; want %d, 0", got, k.Dropped(), want)
	}

	recs := consume(t, cluster.ListenAddrs(), keys*rounds*2)
	perKey := map[string][]record{}
	ids := map[string]bool{}
	partitions := map[int32]bool{}
	for _, r := range recs {
		ev := r.ev
		if ev.Version != events.Version || ev.ID == "" || ev.Timestamp.IsZero() || ev.Backend != "memory" {
			t.Fatalf("event without version, id, timestamp or backend: %+v", ev)
		}
		if ids[ev.ID] {
			t.Fatalf("id %s twice", ev.ID)
		}
		ids[ev.ID] = true
		if r.key != ev.Key {
			t.Fatalf("record key %q carries event of key %q", r.key, ev.Key)
		}
		partitions[r.partition] = true
		perKey[r.key] = append(perKey[r.key], r)
	}
	if len(perKey) != keys || len(partitions) < 2 {
		t.Fatalf("%d keys over %d partitions, want %d keys over several", len(perKey), len(partitions), keys)
	}
	for key, rs := range perKey {
		if len(rs) != rounds*2 {
			t.Fatalf("%s: %d events, want %d", key, len(rs), rounds*2)
		}
		var lastToken uint64
		for i := 0; i < len(rs); i += 2 {
			a, r := rs[i].ev, rs[i+1].ev
			if a.Type != events.TypeAcquired || r.Type != events.TypeReleased {
				t.Fatalf("%s: events %d,%d are %s,%s; want ACQUIRED,RELEASED", key, i, i+1, a.Type, r.Type)
			}
			if a.Token != r.Token || a.Owner != r.Owner || a.Owner == "" || a.Token <= lastToken {
				t.Fatalf("%s: ACQUIRED %d/%s then RELEASED %d/%s after token %d", key, a.Token, a.Owner, r.Token, r.Owner, lastToken)
			}
			if rs[i].partition != rs[i+1].partition || a.ValidityMs <= 0 {
				t.Fatalf("%s: partitions %d,%d validity %d", key, rs[i].partition, rs[i+1].partition, a.ValidityMs)
			}
			lastToken = a.Token
		}
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestKafkaDown: with the brokers unreachable the lock path keeps going;
// the buffer fills and the rest is dropped and counted.
func TestKafkaDown(t *testing.T) {
	const keys, buffer = 1000, 100
	for _, tc := range []struct {
		name string
		live bool // the publisher delivers events before the cluster closes
	}{
		{"nothing listening", false},
		{"cluster closed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds := []string{closedPort(t)}
			var cluster interface{ Close() }
			if tc.live {
				c := startKafka(t, 4)
				seeds, cluster = c.ListenAddrs(), c
			}
			reg := prometheus.NewRegistry()
			k, err := events.NewKafka(seeds, events.WithBuffer(buffer), events.WithCloseTimeout(0), events.WithRegisterer(reg))
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, k)
			var before uint64
			if tc.live {
				if err := lockAll(ctxFor(t, 10*time.Second), c, 10, 1); err != nil {
					t.Fatal(err)
				}
				if err := k.Flush(ctxFor(t, 10*time.Second)); err != nil {
					t.Fatal(err)
				}
				if before = k.Published(); before != 20 {
					t.Fatalf("published %d before the cluster closed, want 20", before)
				}
				cluster.Close()
			}

			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- lockAll(context.Background(), c, keys, 1) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the lock path is blocked by the unreachable Kafka")
			}
			took := time.Since(start)
			plain := newClient(t, turnstile.ObserverFunc(func(turnstile.Event) {}))
			start = time.Now()
			if err := lockAll(context.Background(), plain, keys, 1); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d keys acquired+released concurrently: %v with Kafka down, %v without the publisher", keys, took, time.Since(start))

			observed := uint64(2 * keys)
			if d := k.Dropped(); d < observed-buffer || d > observed {
				t.Fatalf("dropped %d of %d events with a buffer of %d", d, observed, buffer)
			}
			if err := k.Close(); err != nil {
				t.Fatal(err)
			}
			// Close (timeout 0) abandons the buffered ones: every observed event is
			// accounted for.
			if d, p := k.Dropped(), k.Published(); d != observed || p != before {
				t.Fatalf("after Close: dropped %d, published %d; want %d, %d", d, p, observed, before)
			}
			if got := gather(t, reg); got["turnstile_events_dropped_total"] != float64(observed) ||
				got["turnstile_events_published_total"] != float64(before) {
				t.Fatalf("metrics %v", got)
			}
			k.Observe(turnstile.Event{Type: turnstile.EventAcquired, Key: "k"})
			if k.Dropped() != observed+1 {
				t.Fatal("an event observed after Close was not counted as dropped")
			}
		})
	}
}

// gather returns the registry's metrics by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	return out
}

func TestPublish(t *testing.T) {
	cluster := startKafka(t, 2)
	k := newKafka(t, cluster.ListenAddrs())
	ctx := ctxFor(t, 20*time.Second)
	a := events.New(events.TypeAcquired, "lock:a")
	a.Token, a.Owner = 3, "me/1"
	r := events.New(events.TypeReleased, "lock:a")
	r.Token, r.Owner = 3, "me/1"
	if err := k.Publish(ctx, a, r); err != nil {
		t.Fatal(err)
	}
	if err := k.Publish(ctx); err != nil {
		t.Fatalf("Publish of nothing: %v", err)
	}
	bad := events.New("HELD", "lock:b")
	if err := k.Publish(ctx, events.New(events.TypeAcquired, "lock:b"), bad); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("Publish of an invalid event = %v, want ErrInvalidEvent", err)
	}
	if k.Published() != 2 || k.Dropped() != 0 {
		t.Fatalf("published %d dropped %d, want 2, 0", k.Published(), k.Dropped())
	}
	recs := consume(t, cluster.ListenAddrs(), 2)
	if recs[0].ev != a || recs[1].ev != r {
		t.Fatalf("consumed %+v, %+v; want %+v, %+v", recs[0].ev, recs[1].ev, a, r)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Publish(ctx, a); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Publish after Close = %v, want ErrClosed", err)
	}
	if err := k.Flush(ctx); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Flush after Close = %v, want ErrClosed", err)
	}
	if err := k.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestPublishUnreachable: Publish waits for the acknowledgement, so with
// no broker it ends with the context.
func TestPublishUnreachable(t *testing.T) {
	k := newKafka(t, []string{closedPort(t)}, events.WithCloseTimeout(0))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := k.Publish(ctx, events.New(events.TypeLost, "lock:a"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish = %v, want context.DeadlineExceeded", err)
	}
	if k.Published() != 0 {
		t.Fatalf("published %d", k.Published())
	}
}

func TestWithClient(t *testing.T) {
	cluster := startKafka(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	k := newKafka(t, nil, events.WithClient(cl), events.WithTopic(events.Topic))
	k.Observe(turnstile.Event{Type: turnstile.EventLost, Key: "lock:x", Owner: "o", Token: 9, Time: time.Now(), Err: turnstile.ErrLockLost})
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	recs := consume(t, cluster.ListenAddrs(), 1)
	if ev := recs[0].ev; ev.Type != events.TypeLost || ev.Key != "lock:x" || ev.Token != 9 || !strings.Contains(ev.Error, "lock lost") {
		t.Fatalf("consumed %+v", ev)
	}
	// Close left the caller's client open.
	if err := cl.ProduceSync(ctxFor(t, 10*time.Second), &kgo.Record{Topic: events.Topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("the caller's client after Close: %v", err)
	}
}

func TestNewKafkaInvalid(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reg := prometheus.NewRegistry()
	taken, err := events.NewKafka([]string{"127.0.0.1:1"}, events.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name  string
		seeds []string
		opts  []events.Option
		want  error
	}{
		{"no seeds", nil, nil, turnstile.ErrInvalidOption},
		{"empty seed", []string{""}, nil, turnstile.ErrInvalidOption},
		{"bad seed", []string{"127.0.0.1:notaport"}, nil, turnstile.ErrInvalidOption},
		{"nil option", []string{"127.0.0.1:1"}, []events.Option{nil}, turnstile.ErrInvalidOption},
		{"buffer 0", []string{"127.0.0.1:1"}, []events.Option{events.WithBuffer(0)}, turnstile.ErrInvalidOption},
		{"empty topic", []string{"127.0.0.1:1"}, []events.Option{events.WithTopic("")}, turnstile.ErrInvalidOption},
		{"nil client", nil, []events.Option{events.WithClient(nil)}, turnstile.ErrInvalidOption},
		{"seeds and client", []string{"127.0.0.1:1"}, []events.Option{events.WithClient(cl)}, turnstile.ErrInvalidOption},
		{"client and client options", nil, []events.Option{events.WithClient(cl), events.WithClientOptions(kgo.ClientID("x"))}, turnstile.ErrInvalidOption},
		{"nil client option", []string{"127.0.0.1:1"}, []events.Option{events.WithClientOptions(nil)}, turnstile.ErrInvalidOption},
		{"nil registerer", []string{"127.0.0.1:1"}, []events.Option{events.WithRegisterer(nil)}, turnstile.ErrInvalidOption},
		{"negative close timeout", []string{"127.0.0.1:1"}, []events.Option{events.WithCloseTimeout(-time.Second)}, turnstile.ErrInvalidOption},
		{"metrics registered twice", []string{"127.0.0.1:1"}, []events.Option{events.WithRegisterer(reg)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := events.NewKafka(tc.seeds, tc.opts...)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				if k != nil {
					_ = k.Close()
				}
				t.Fatalf("NewKafka = %v, want an error matching %v", err, tc.want)
			}
		})
	}
}

// BenchmarkObserve is the cost Observe adds to every lock operation:
// with brokers that answer, and with none (events dropped once the buffer
// is full).
func BenchmarkObserve(b *testing.B) {
	ev := turnstile.Event{Type: turnstile.EventAcquired, Time: time.Now(), Backend: "memory",
		Key: "lock:inventory:12345", Owner: "host-1/J3QHX5MZ7NWA2QJXKX4J4QHV6Y", Token: 42, Validity: 29 * time.Second}
	for _, tc := range []struct {
		name  string
		seeds func(b *testing.B) []string
	}{
		{"up", func(b *testing.B) []string { return startKafka(b, 8).ListenAddrs() }},
		{"down", func(b *testing.B) []string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			_ = ln.Close()
			return []string{ln.Addr().String()}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			k := newKafka(b, tc.seeds(b), events.WithCloseTimeout(0))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k.Observe(ev)
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(k.Dropped())/float64(b.N), "dropped/op")
		})
	}
}

// TestKafkaRecovers: while the brokers refuse every produce request the
// buffer fills and the rest is dropped; when they take produce requests
// again the buffered events are delivered, each key's in order.
func TestKafkaRecovers(t *testing.T) {
	const keys, buffer = 1000, 100
	cluster := startKafka(t, 4)
	var down atomic.Bool
	down.Store(true)
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !down.Load() {
			return nil, nil, false // the cluster answers as usual
		}
		cluster.KeepControl()
		return nil, errors.New("produce refused by the test"), true // closes the connection
	})
	k := newKafka(t, cluster.ListenAddrs(), events.WithBuffer(buffer))
	c := newClient(t, k)
	if err := lockAll(ctxFor(t, 20*time.Second), c, keys, 1); err != nil {
		t.Fatal(err)
	}
	if d := k.Dropped(); d < 2*keys-buffer {
		t.Fatalf("dropped %d of %d with a buffer of %d while Kafka refused produce requests", d, 2*keys, buffer)
	}
	if k.Published() != 0 {
		t.Fatalf("published %d while Kafka refused produce requests", k.Published())
	}
	down.Store(false)
	if err := k.Flush(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	published, dropped := k.Published(), k.Dropped()
	if published+dropped != 2*keys || published == 0 {
		t.Fatalf("after recovery: published %d, dropped %d; want a sum of %d, some published", published, dropped, 2*keys)
	}
	perKey := map[string][]events.Event{}
	for _, r := range consume(t, cluster.ListenAddrs(), int(published)) {
		perKey[r.key] = append(perKey[r.key], r.ev)
	}
	for key, evs := range perKey {
		if len(evs) == 2 && (evs[0].Type != events.TypeAcquired || evs[1].Type != events.TypeReleased || evs[0].Token != evs[1].Token) {
			t.Fatalf("%s: delivered %s %d then %s %d", key, evs[0].Type, evs[0].Token, evs[1].Type, evs[1].Token)
		}
		if len(evs) > 2 {
			t.Fatalf("%s: %d events delivered, at most 2 observed", key, len(evs))
		}
	}
	t.Logf("buffer %d: %d delivered after recovery, %d dropped", buffer, published, dropped)
}

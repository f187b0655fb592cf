package consume_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/consume"
	"github.com/turnstilelock/turnstile/events/internal/kafkatest"
	"github.com/turnstilelock/turnstile/memory"
)

// lockActivity runs a memory-backed Client whose events go to cluster:
// each of keys is acquired, extended and released rounds times, every
// key in its own goroutine. It returns the events as published, in
// the order each key's were observed.
func lockActivity(t *testing.T, cluster *kfake.Cluster, keys, rounds int, prefix string) []events.Event {
	t.Helper()
	k, err := events.NewKafka(cluster.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	var mu sync.Mutex
	var observed []turnstile.Event
	rec := turnstile.ObserverFunc(func(e turnstile.Event) {
		mu.Lock()
		observed = append(observed, e)
		mu.Unlock()
	})
	c, err := turnstile.New(memory.New(), turnstile.WithObserver(k), turnstile.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxFor(t, 30*time.Second)
	extend := func(ctx context.Context, l *turnstile.Lease) error { return l.Extend(ctx, 30*time.Second) }
	if err := kafkatest.LockAll(ctx, c, prefix, keys, rounds, extend); err != nil {
		t.Fatal(err)
	}
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if k.Published() != uint64(keys*rounds*3) || k.Dropped() != 0 {
		t.Fatalf("published %d, dropped %d; want %d, 0", k.Published(), k.Dropped(), keys*rounds*3)
	}
	// The ids are the publisher's; the consumer's store tells them. Here
	// only the count and the per-key order of types and tokens matter.
	mu.Lock()
	defer mu.Unlock()
	out := make([]events.Event, 0, len(observed))
	for _, e := range observed {
		if ev, ok := events.FromLock(e); ok {
			out = append(out, ev)
		}
	}
	return out
}

// checkLeases checks that each key's applied events are its leases'
// ACQUIRED, EXTENDED, RELEASED in order, tokens rising, rounds leases.
func checkLeases(t *testing.T, s *store, keys, rounds int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.applied) != keys {
		t.Fatalf("events of %d keys applied, want %d", len(s.applied), keys)
	}
	for key, evs := range s.applied {
		if len(evs) != 3*rounds {
			t.Fatalf("%s: %d events applied, want %d", key, len(evs), 3*rounds)
		}
		var last uint64
		for i := 0; i < len(evs); i += 3 {
			a, e, r := evs[i], evs[i+1], evs[i+2]
			if a.Type != events.TypeAcquired || e.Type != events.TypeExtended || r.Type != events.TypeReleased {
				t.Fatalf("%s: lease %d applied as %s, %s, %s", key, i/3, a.Type, e.Type, r.Type)
			}
			if a.Token <= last || e.Token != a.Token || r.Token != a.Token {
				t.Fatalf("%s: tokens %d, %d, %d after %d", key, a.Token, e.Token, r.Token, last)
			}
			last = a.Token
		}
	}
	for id, n := range s.times {
		if n != 1 {
			t.Fatalf("event %s applied %d times", id, n)
		}
	}
}

// TestLockActivity: the events of real lock activity on 100 keys, three
// leases each, are applied once each, every key's in lease and token
// order, and the application is asked once per key for its position.
func TestLockActivity(t *testing.T) {
	const keys, rounds = 100, 3
	cluster := startKafka(t, 8)
	lockActivity(t, cluster, keys, rounds, "lock:item")
	s := newStore(t)
	reg := prometheus.NewRegistry()
	var errs errorLog
	c := newConsumer(t, cluster, "activity", s, &errs, consume.WithRegisterer(reg))
	stop := run(t, c, s.Apply)
	waitFor(t, "every event applied", func() bool { return s.count() >= keys*rounds*3 })
	if err := stop(); !errors.Is(err, consume.ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
	checkLeases(t, s, keys, rounds)
	if st := c.Stats(); st != (consume.Stats{Applied: keys * rounds * 3}) {
		t.Fatalf("stats %+v, want %d applied and nothing else", st, keys*rounds*3)
	}
	if got := gather(t, reg); got["applied"] != keys*rounds*3 || got["duplicate"] != 0 || got["stale"] != 0 || got["poison"] != 0 {
		t.Fatalf("metrics %v", got)
	}
	if lookups := s.lookupCount(); lookups != keys {
		t.Fatalf("LastApplied asked %d times, want once per key (%d)", lookups, keys)
	}
	if err := c.Run(context.Background(), s.Apply); !errors.Is(err, consume.ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
	if len(errs.errs) != 0 {
		t.Fatalf("errors reported: %v", errs.String())
	}
}

// gather returns the consumer's counter by result.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "turnstile_events_consumed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// publish publishes evs through a publisher of its own.
func publish(t *testing.T, cluster *kfake.Cluster, evs ...events.Event) {
	t.Helper()
	k, err := events.NewKafka(cluster.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.Publish(ctxFor(t, 20*time.Second), evs...); err != nil {
		t.Fatal(err)
	}
}

// produceRaw writes records with the given keys and values as they are.
func produceRaw(t *testing.T, cluster *kfake.Cluster, kv ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic(events.Topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, &kgo.Record{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	if err := cl.ProduceSync(ctxFor(t, 20*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func event(typ, key string, token uint64) events.Event {
	ev := events.New(typ, key)
	ev.Owner, ev.Token = "host-1/owner", token
	return ev
}

// TestStaleAndPoison: on one key (one partition), a lease with token 5,
// then a late ACQUIRED of token 3, two poison records, a repeated
// ACQUIRED of token 5 and the RELEASED of token 5 after the poison: the
// stale and repeated events are dropped and counted, the poison records
// counted and reported, and the consumer goes on to apply the release.
func TestStaleAndPoison(t *testing.T) {
	const key = "lock:order:42"
	cluster := startKafka(t, 1)
	a5, e5, a3, r5 := event(events.TypeAcquired, key, 5), event(events.TypeExtended, key, 5), event(events.TypeAcquired, key, 3), event(events.TypeReleased, key, 5)
	failed := events.New(events.TypeFailed, key) // no token: outside the fence
	publish(t, cluster, a5, e5, a3, failed)
	produceRaw(t, cluster, key, `{"version":1,"id":"x","password":"hunter2"}`, key, "\xff not json")
	other := event(events.TypeAcquired, "lock:other", 9)
	wrongKey, err := jsonOf(other)
	if err != nil {
		t.Fatal(err)
	}
	produceRaw(t, cluster, key, wrongKey)
	publish(t, cluster, a5, e5, failed, r5)

	s := newStore(t)
	var errs errorLog
	c := newConsumer(t, cluster, "stale", s, &errs)
	stop := run(t, c, s.Apply)
	waitFor(t, "every record read", func() bool {
		st := c.Stats()
		return st.Applied+st.Duplicates+st.Stale+st.Poison >= 11
	})
	if err := stop(); !errors.Is(err, consume.ErrClosed) {
		t.Fatalf("Run = %v, want ErrClosed", err)
	}
	if st := c.Stats(); st != (consume.Stats{Applied: 4, Duplicates: 3, Stale: 1, Poison: 3}) {
		t.Fatalf("stats %+v; want 4 applied, 3 duplicates, 1 stale, 3 poison", st)
	}
	s.checkOnce([]events.Event{a5, e5, failed, r5})
	var types []string
	for _, ev := range s.applied[key] {
		types = append(types, fmt.Sprintf("%s/%d", ev.Type, ev.Token))
	}
	if got := strings.Join(types, " "); got != "ACQUIRED/5 EXTENDED/5 FAILED/0 RELEASED/5" {
		t.Fatalf("applied %s", got)
	}
	poison := errs.poison()
	if len(poison) != 3 {
		t.Fatalf("poison reported: %v", errs.String())
	}
	for i, pe := range poison {
		if !errors.Is(pe, events.ErrInvalidEvent) || pe.Topic != events.Topic || pe.Offset != int64(4+i) {
			t.Fatalf("poison report %d: %v (offset %d)", i, pe, pe.Offset)
		}
		if strings.Contains(pe.Error(), "hunter2") || strings.Contains(pe.Error(), "lock:other") {
			t.Fatalf("poison report repeats the record's value: %v", pe)
		}
	}
	if fe, _ := errors.AsType[*events.FieldError](poison[2]); fe == nil || fe.Field != "key" {
		t.Fatalf("record of another key's event reported as %v", poison[2])
	}
}

func jsonOf(ev events.Event) (string, error) {
	b, err := json.Marshal(ev)
	return string(b), err
}

// TestRestart: a consumer applies a first set of events and commits
// them; then its commits fail while it applies a second set, and it is
// closed. A new consumer of the group, with an empty memory, starts at
// the committed offsets: it reads the second set again and drops all of
// it on the application's positions, and applies a third set. Every
// event is applied exactly once.
func TestRestart(t *testing.T) {
	const keys = 50
	cluster := startKafka(t, 4)
	var refuse atomic.Bool
	var committed atomic.Int64 // sum of the offsets committed, over the partitions
	offsets := map[int32]int64{}
	cluster.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		oc := req.(*kmsg.OffsetCommitRequest)
		if !refuse.Load() {
			for _, tp := range oc.Topics {
				for _, p := range tp.Partitions {
					offsets[p.Partition] = p.Offset
				}
			}
			var sum int64
			for _, o := range offsets {
				sum += o
			}
			committed.Store(sum)
			return nil, nil, false
		}
		resp := oc.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.SetVersion(oc.GetVersion())
		for _, tp := range oc.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = tp.Topic
			for _, p := range tp.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.OffsetMetadataTooLarge.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})

	set := func(round uint64) []events.Event {
		var evs []events.Event
		for i := range keys {
			key := fmt.Sprintf("lock:item:%d", i)
			evs = append(evs, event(events.TypeAcquired, key, round), event(events.TypeReleased, key, round))
		}
		return evs
	}
	first, second, third := set(1), set(2), set(3)
	s := newStore(t)

	publish(t, cluster, first...)
	var errsA errorLog
	a := newConsumer(t, cluster, "restart", s, &errsA)
	stopA := run(t, a, s.Apply)
	waitFor(t, "the first set applied and committed", func() bool { return committed.Load() == int64(len(first)) })
	refuse.Store(true)
	publish(t, cluster, second...)
	waitFor(t, "the second set applied", func() bool { return s.count() == len(first)+len(second) })
	if err := stopA(); !errors.Is(err, consume.ErrClosed) {
		t.Fatalf("Run = %v, want ErrClosed", err)
	}
	if committed.Load() != int64(len(first)) {
		t.Fatalf("offsets %d committed, want %d", committed.Load(), len(first))
	}
	if !strings.Contains(errsA.String(), "commit offsets") {
		t.Fatalf("the refused commits were not reported: %v", errsA.String())
	}

	refuse.Store(false)
	publish(t, cluster, third...)
	var errsB errorLog
	b := newConsumer(t, cluster, "restart", s, &errsB)
	stopB := run(t, b, s.Apply)
	waitFor(t, "the third set applied", func() bool { return s.count() >= len(first)+len(second)+len(third) })
	if err := stopB(); !errors.Is(err, consume.ErrClosed) {
		t.Fatalf("Run = %v, want ErrClosed", err)
	}
	st := b.Stats()
	if st.Applied != uint64(len(third)) || st.Duplicates+st.Stale != uint64(len(second)) || st.Poison != 0 {
		t.Fatalf("restarted consumer: %+v; want %d applied and the %d events of the second set dropped", st, len(third), len(second))
	}
	if st.Duplicates != keys {
		t.Fatalf("restarted consumer: %d duplicates, want %d: each key's last applied event", st.Duplicates, keys)
	}
	s.checkOnce(append(append(first, second...), third...))
	if len(errsB.errs) != 0 {
		t.Fatalf("errors reported: %v", errsB.String())
	}
}

// TestMaxKeys: a consumer that holds 3 keys reads 20 keys' events, each
// published twice, far apart: it forgets keys, asks the application for
// their positions, and applies each event once.
func TestMaxKeys(t *testing.T) {
	const keys = 20
	cluster := startKafka(t, 2)
	var want []events.Event
	for round := range uint64(2) {
		for i := range keys {
			key := fmt.Sprintf("lock:item:%d", i)
			want = append(want, event(events.TypeAcquired, key, round+1), event(events.TypeReleased, key, round+1))
		}
	}
	publish(t, cluster, want...)
	publish(t, cluster, want...)
	s := newStore(t)
	c := newConsumer(t, cluster, "maxkeys", s, nil, consume.WithMaxKeys(3))
	stop := run(t, c, s.Apply)
	waitFor(t, "every record read", func() bool {
		st := c.Stats()
		return st.Applied+st.Duplicates+st.Stale >= uint64(2*len(want))
	})
	if err := stop(); !errors.Is(err, consume.ErrClosed) {
		t.Fatalf("Run = %v, want ErrClosed", err)
	}
	s.checkOnce(want)
	if st := c.Stats(); st.Applied != uint64(len(want)) || st.Duplicates+st.Stale != uint64(len(want)) {
		t.Fatalf("stats %+v", st)
	}
	if n := s.lookupCount(); n < 3*keys {
		t.Fatalf("LastApplied asked %d times; with 3 keys held, each of %d keys is forgotten and asked for again", n, keys)
	}
}

// TestHandlerError: a handler error stops Run, which returns it; the
// next Run hands the same event over again and goes on. With WithRetry
// the handler is called again and Run does not stop.
func TestHandlerError(t *testing.T) {
	cluster := startKafka(t, 2)
	var want []events.Event
	for i := range 10 {
		key := fmt.Sprintf("lock:item:%d", i)
		want = append(want, event(events.TypeAcquired, key, 1), event(events.TypeReleased, key, 1))
	}
	publish(t, cluster, want...)
	failOn := want[7].ID
	errBusy := errors.New("database busy")

	t.Run("stop", func(t *testing.T) {
		s := newStore(t)
		c := newConsumer(t, cluster, "handler-stop", s, nil)
		var failures atomic.Int32
		h := func(ctx context.Context, ev events.Event) error {
			if ev.ID == failOn && failures.Add(1) == 1 {
				return errBusy
			}
			return s.Apply(ctx, ev)
		}
		err := c.Run(ctxFor(t, 30*time.Second), h)
		if !errors.Is(err, errBusy) || !strings.Contains(err.Error(), failOn) {
			t.Fatalf("Run = %v, want the handler's error naming the event", err)
		}
		if failures.Load() != 1 {
			t.Fatalf("handler failed %d times, want 1 (no retry)", failures.Load())
		}
		stop := run(t, c, h)
		waitFor(t, "every event applied", func() bool { return s.count() >= len(want) })
		if err := stop(); !errors.Is(err, consume.ErrClosed) {
			t.Fatalf("Run = %v, want ErrClosed", err)
		}
		s.checkOnce(want)
		if failures.Load() != 2 {
			t.Fatalf("failing event handed over %d times, want 2", failures.Load())
		}
	})
	t.Run("context", func(t *testing.T) {
		s := newStore(t)
		c := newConsumer(t, cluster, "handler-context", s, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := c.Run(ctx, func(ctx context.Context, ev events.Event) error {
			if err := s.Apply(ctx, ev); err != nil {
				return err
			}
			if ev.ID == failOn {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		stop := run(t, c, s.Apply)
		waitFor(t, "every event applied", func() bool { return s.count() >= len(want) })
		if err := stop(); !errors.Is(err, consume.ErrClosed) {
			t.Fatalf("Run = %v, want ErrClosed", err)
		}
		s.checkOnce(want)
	})
	t.Run("retry", func(t *testing.T) {
		s := newStore(t)
		c := newConsumer(t, cluster, "handler-retry", s, nil, consume.WithRetry(3, time.Millisecond))
		var failures atomic.Int32
		stop := run(t, c, func(ctx context.Context, ev events.Event) error {
			if ev.ID == failOn && failures.Add(1) <= 2 {
				return errBusy
			}
			return s.Apply(ctx, ev)
		})
		waitFor(t, "every event applied", func() bool { return s.count() >= len(want) })
		if err := stop(); !errors.Is(err, consume.ErrClosed) {
			t.Fatalf("Run = %v, want ErrClosed", err)
		}
		s.checkOnce(want)
		if failures.Load() != 3 {
			t.Fatalf("failing event handed over %d times, want 3", failures.Load())
		}
	})
}

func TestNewInvalid(t *testing.T) {
	last := func(context.Context, string) (consume.Position, error) { return consume.Position{}, nil }
	reg := prometheus.NewRegistry()
	taken, err := consume.New([]string{"127.0.0.1:1"}, "g", last, consume.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	seeds := []string{"127.0.0.1:1"}
	for _, tc := range []struct {
		name  string
		seeds []string
		group string
		last  consume.LastApplied
		opts  []consume.Option
	}{
		{"no seeds", nil, "g", last, nil},
		{"empty seed", []string{""}, "g", last, nil},
		{"bad seed", []string{"127.0.0.1:notaport"}, "g", last, nil},
		{"no group", seeds, "", last, nil},
		{"nil LastApplied", seeds, "g", nil, nil},
		{"nil option", seeds, "g", last, []consume.Option{nil}},
		{"empty topic", seeds, "g", last, []consume.Option{consume.WithTopic("")}},
		{"nil client option", seeds, "g", last, []consume.Option{consume.WithClientOptions(nil)}},
		{"max keys 0", seeds, "g", last, []consume.Option{consume.WithMaxKeys(0)}},
		{"retry 0", seeds, "g", last, []consume.Option{consume.WithRetry(0, time.Second)}},
		{"negative retry wait", seeds, "g", last, []consume.Option{consume.WithRetry(2, -time.Second)}},
		{"nil error handler", seeds, "g", last, []consume.Option{consume.WithErrorHandler(nil)}},
		{"nil registerer", seeds, "g", last, []consume.Option{consume.WithRegisterer(nil)}},
		{"metrics registered twice", seeds, "g", last, []consume.Option{consume.WithRegisterer(reg)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := consume.New(tc.seeds, tc.group, tc.last, tc.opts...)
			if err == nil {
				c.Close()
				t.Fatal("New accepted it")
			}
			if tc.name != "metrics registered twice" && !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Fatalf("New = %v, want ErrInvalidOption", err)
			}
		})
	}
	if err := taken.Run(context.Background(), nil); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("Run with a nil handler = %v, want ErrInvalidOption", err)
	}
}

// TestRebalance: a second member joins the group and takes partitions,
// applies later events of their keys, and leaves. The first member, which
// gets the partitions back, must not trust what it remembered of their
// keys: when the events the second member applied are published again,
// it drops them on the application's positions instead of applying them
// a second time.
func TestRebalance(t *testing.T) {
	const keys = 20
	cluster := startKafka(t, 2)
	fast := consume.WithClientOptions(kgo.HeartbeatInterval(50*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
	s := newStore(t)
	var byB sync.Map // id → event, the events the second member applied
	a := newConsumer(t, cluster, "rebalance", s, nil, fast)
	stopA := run(t, a, s.Apply)
	b := newConsumer(t, cluster, "rebalance", s, nil, fast)

	round := func(r uint64) {
		t.Helper()
		var evs []events.Event
		for i := range keys {
			key := fmt.Sprintf("lock:item:%d", i)
			evs = append(evs, event(events.TypeAcquired, key, r), event(events.TypeReleased, key, r))
		}
		want := s.count() + len(evs)
		publish(t, cluster, evs...)
		waitFor(t, fmt.Sprintf("round %d applied", r), func() bool { return s.count() >= want })
	}
	round(1) // a holds every key
	stopB := run(t, b, func(ctx context.Context, ev events.Event) error {
		byB.Store(ev.ID, ev)
		return s.Apply(ctx, ev)
	})
	deadline := time.Now().Add(30 * time.Second)
	for r := uint64(2); b.Stats().Applied == 0; r++ {
		if time.Now().After(deadline) {
			t.Fatal("the second member never got a partition")
		}
		round(r)
		time.Sleep(50 * time.Millisecond)
	}
	if err := stopB(); !errors.Is(err, consume.ErrClosed) {
		t.Fatalf("second member: Run = %v, want ErrClosed", err)
	}
	var again []events.Event
	byB.Range(func(_, v any) bool {
		again = append(again, v.(events.Event))
		return true
	})
	before := a.Stats()
	publish(t, cluster, again...)
	waitFor(t, "the first member to drop the republished events", func() bool {
		st := a.Stats()
		return st.Duplicates+st.Stale-before.Duplicates-before.Stale >= uint64(len(again)) || st.Applied > before.Applied
	})
	if err := stopA(); !errors.Is(err, consume.ErrClosed) {
		t.Fatalf("first member: Run = %v, want ErrClosed", err)
	}
	if st := a.Stats(); st.Applied != before.Applied {
		t.Fatalf("the first member applied %d of the %d republished events the second had applied", st.Applied-before.Applied, len(again))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.times {
		if n != 1 {
			t.Fatalf("event %s applied %d times", id, n)
		}
	}
}

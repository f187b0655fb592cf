package consume_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/consume"
	"github.com/turnstilelock/turnstile/events/internal/kafkatest"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// startKafka runs an in-process Kafka cluster with the events topic in
// partitions partitions, closed when the test ends.
var startKafka = kafkatest.Start

// store is the application's storage the tests apply events to: per
// key the events applied, in order, and the position stored with them.
type store struct {
	t *testing.T

	mu      sync.Mutex
	pos     map[string]consume.Position
	applied map[string][]events.Event
	times   map[string]int // per event id, how often it was applied
	n       int
	lookups int // LastApplied calls
}

func newStore(t *testing.T) *store {
	return &store{t: t, pos: map[string]consume.Position{}, applied: map[string][]events.Event{}, times: map[string]int{}}
}

// Apply is a Handler. It fails the test if an event of a key comes
// that is not after the key's stored position: the fence the consumer
// keeps.
func (s *store) Apply(_ context.Context, ev events.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := consume.PositionOf(ev)
	if ev.Token != 0 {
		if last := s.pos[ev.Key]; !last.Before(at) {
			s.t.Errorf("%s: %s token %d (%s) applied after %s token %d (%s)", ev.Key, ev.Type, ev.Token, ev.ID, last.Type, last.Token, last.ID)
		}
		s.pos[ev.Key] = at
	}
	s.applied[ev.Key] = append(s.applied[ev.Key], ev)
	s.times[ev.ID]++
	s.n++
	return nil
}

// LastApplied is the consumer's LastApplied.
func (s *store) LastApplied(_ context.Context, key string) (consume.Position, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	return s.pos[key], nil
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *store) lookupCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups
}

// checkOnce fails the test unless each of want was applied exactly once
// and nothing else was.
func (s *store) checkOnce(want []events.Event) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range want {
		if n := s.times[ev.ID]; n != 1 {
			s.t.Fatalf("event %s (%s %s token %d) applied %d times, want once", ev.ID, ev.Type, ev.Key, ev.Token, n)
		}
	}
	if len(s.times) != len(want) || s.n != len(want) {
		s.t.Fatalf("%d applies of %d distinct events, want %d once each", s.n, len(s.times), len(want))
	}
}

// newConsumer returns a consumer of group on cluster applying to s,
// closed when the test ends; its reported errors go to errs, if not nil.
func newConsumer(t *testing.T, cluster *kfake.Cluster, group string, s *store, errs *errorLog, opts ...consume.Option) *consume.Consumer {
	t.Helper()
	if errs != nil {
		opts = append([]consume.Option{consume.WithErrorHandler(errs.add)}, opts...)
	}
	c, err := consume.New(cluster.ListenAddrs(), group, s.LastApplied, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// run runs c with s's Apply until stop is called; stop closes c and
// returns Run's error.
func run(t *testing.T, c *consume.Consumer, h consume.Handler) (stop func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), h) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			c.Close()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitFor polls cond until it holds, for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// errorLog collects the errors a consumer reports.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *errorLog) poison() []*consume.PoisonError {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*consume.PoisonError
	for _, err := range l.errs {
		if pe, ok := errors.AsType[*consume.PoisonError](err); ok {
			out = append(out, pe)
		}
	}
	return out
}

func (l *errorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.errs)
}

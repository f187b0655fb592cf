package service_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"

	_ "github.com/turnstilelock/turnstile/redis"
)

// watchStream opens a Watch and reads its Watching message.
func watchStream(t *testing.T, c apiClients, req *v1.WatchRequest) (*connect.ServerStreamForClient[v1.WatchResponse], *v1.Watching) {
	t.Helper()
	s, err := c.locks.Watch(ctxFor(t, time.Minute), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if !s.Receive() || s.Msg().GetWatching() == nil {
		t.Fatalf("Watch began with %v, %v; want Watching", s.Msg(), s.Err())
	}
	return s, s.Msg().GetWatching()
}

func nextEvent(t *testing.T, s *connect.ServerStreamForClient[v1.WatchResponse]) *v1.Event {
	t.Helper()
	if !s.Receive() {
		t.Fatalf("Watch ended: %v", s.Err())
	}
	return s.Msg().GetEvent()
}

// TestWatchPrefix: a watch of a prefix reports what the instance does
// under it, in order, with owners and tokens, and nothing outside it.
func TestWatchPrefix(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	c := clientsOf(t, in.addr)
	s, _ := watchStream(t, c, &v1.WatchRequest{Key: "orders:", Prefix: true})
	ctx := ctxFor(t, 10*time.Second)
	if _, err := c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "elsewhere"})); err != nil {
		t.Fatal(err)
	}
	g, err := c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "orders:1"}))
	if err != nil {
		t.Fatal(err)
	}
	l := g.Msg.Lease
	if _, err := c.locks.Extend(ctx, connect.NewRequest(&v1.ExtendRequest{Lease: l})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.locks.Release(ctx, connect.NewRequest(&v1.ReleaseRequest{Lease: l})); err != nil {
		t.Fatal(err)
	}
	for _, want := range []v1.EventType{v1.EventType_EVENT_TYPE_ACQUIRED, v1.EventType_EVENT_TYPE_EXTENDED, v1.EventType_EVENT_TYPE_RELEASED} {
		e := nextEvent(t, s)
		if e.Type != want || e.Key != "orders:1" || e.Owner != l.Owner || e.Token != l.Token || e.Source != v1.EventSource_EVENT_SOURCE_INSTANCE {
			t.Fatalf("event %v, want %v of orders:1 by %s, token %d", e, want, l.Owner, l.Token)
		}
	}
}

// TestWatchKeySeesTheStore: a watch of one key on a store that sends
// release notices (Redis) reports a release by another client of the
// store, which the instance never saw.
func TestWatchKeySeesTheStore(t *testing.T) {
	srv := testserver.StartRedis(t)
	direct, err := turnstile.Open(ctxFor(t, 10*time.Second), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	in := startInstance(t, service.Config{Backend: direct.Backend()})
	c := clientsOf(t, in.addr)
	ctx := ctxFor(t, 30*time.Second)
	l, err := direct.TryAcquire(ctx, "store:key")
	if err != nil {
		t.Fatal(err)
	}
	s, w := watchStream(t, c, &v1.WatchRequest{Key: "store:key"})
	if !w.StoreNotices {
		t.Fatal("Watching says the store sends no notices; Redis does")
	}
	// Redis tells of a release when someone failed to take the lock
	// meanwhile: one attempt through the instance.
	if _, err := c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "store:key"})); err == nil {
		t.Fatal("TryAcquire of a held key succeeded")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	e := nextEvent(t, s)
	if e.Type != v1.EventType_EVENT_TYPE_RELEASED || e.Source != v1.EventSource_EVENT_SOURCE_STORE || e.Key != "store:key" {
		t.Fatalf("event %v, want RELEASED from the store", e)
	}
}

// TestQueuePositions: Queue streams the caller's place in the store's
// queue, then the grant, in arrival order.
func TestQueuePositions(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	c := clientsOf(t, in.addr)
	ctx := ctxFor(t, 30*time.Second)
	fair := v1.Kind_KIND_FAIR
	g, err := c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "q", Kind: fair}))
	if err != nil {
		t.Fatal(err)
	}
	// Two join the line, one after the other.
	var line [2]*connect.ServerStreamForClient[v1.QueueResponse]
	for i, name := range []string{"first", "second"} {
		s, err := c.locks.Queue(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "q", Kind: fair}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if p := nextPosition(t, s); p != uint32(i+1) {
			t.Fatalf("%s in line: position %d, want %d", name, p, i+1)
		}
		line[i] = s
	}
	first, second := line[0], line[1]
	if _, err := c.locks.Release(ctx, connect.NewRequest(&v1.ReleaseRequest{Lease: g.Msg.Lease})); err != nil {
		t.Fatal(err)
	}
	var granted *v1.AcquireResponse
	for first.Receive() {
		if granted = first.Msg().GetGranted(); granted != nil {
			break
		}
	}
	if granted == nil || granted.Lease.Token <= g.Msg.Lease.Token {
		t.Fatalf("first in line: %v %v, want the grant", granted, first.Err())
	}
	for second.Receive() {
		if p := second.Msg().GetPosition(); p != nil && p.Position == 1 {
			return
		}
	}
	t.Fatalf("second in line never moved to 1: %v", second.Err())
}

// nextPosition reads a Queue stream up to its next place in line, past
// its Waiting.
func nextPosition(t *testing.T, s *connect.ServerStreamForClient[v1.QueueResponse]) uint32 {
	t.Helper()
	for s.Receive() {
		if p := s.Msg().GetPosition(); p != nil {
			return p.Position
		}
		if s.Msg().GetWaiting() == nil {
			t.Fatalf("Queue sent %v before a place", s.Msg())
		}
	}
	t.Fatalf("Queue ended: %v", s.Err())
	return 0
}

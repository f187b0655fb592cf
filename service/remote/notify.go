package remote

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// Released implements driver.Notifier with a Watch stream of the key:
// a notice for every release, loss or forced release the instance
// reports (its own, and the store's notices where the store sends them).
// It returns once the watch is in place, so that a release after it
// returned is not missed by the watch's making. When the stream breaks
// (the instance went away) it sends a notice — a release may have gone
// unseen — and watches again, on the next instance if need be, until
// ctx is done or stop is called. The channel is never closed.
func (b *Backend) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	wctx, cancel := context.WithCancel(ctx)
	req := &v1.WatchRequest{Key: key, Kind: b.kind, Permits: b.permits}
	first, err := b.watch(wctx, req)
	if err != nil {
		cancel()
		return nil, nil, asDriverError(err)
	}
	ch := make(chan struct{}, 1)
	notify := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := first
		for {
			b.relay(s, notify)
			_ = s.Close()
			if wctx.Err() != nil {
				return
			}
			notify()
			for s = nil; s == nil; {
				t := time.NewTimer(rand.N(time.Second) + 100*time.Millisecond)
				select {
				case <-wctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				if next, err := b.watch(wctx, req); err == nil {
					s = next
				}
			}
		}
	}()
	return ch, func() { cancel(); <-done }, nil
}

type watchStream = connect.ServerStreamForClient[v1.WatchResponse]

// watch opens a Watch stream and waits for it to be in place.
func (b *Backend) watch(ctx context.Context, req *v1.WatchRequest) (*watchStream, error) {
	return call(ctx, b.c, func(in *instance) (*watchStream, error) {
		s, err := in.locks.Watch(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		if !s.Receive() {
			err := s.Err()
			_ = s.Close()
			if err == nil {
				err = errors.New("the watch ended before it began")
			}
			return nil, err
		}
		if s.Msg().GetWatching() == nil {
			_ = s.Close()
			return nil, fmt.Errorf("the watch began with %v, not Watching", s.Msg())
		}
		return s, nil
	})
}

// relay turns a Watch stream's events into notices until it ends.
func (b *Backend) relay(s *watchStream, notify func()) {
	for s.Receive() {
		e := s.Msg().GetEvent()
		switch e.GetType() {
		case v1.EventType_EVENT_TYPE_RELEASED, v1.EventType_EVENT_TYPE_LOST, v1.EventType_EVENT_TYPE_FORCE_RELEASED:
			notify()
		}
	}
}

package service

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/turnstilelock/turnstile/driver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// Watch: the instance's own events (hub.go) for a key or a prefix, and
// for one key the store's release notices where the store sends them.
// See WatchRequest in the .proto for what it covers, and what not.
func (h *locks) Watch(ctx context.Context, req *connect.Request[v1.WatchRequest], stream *connect.ServerStream[v1.WatchResponse]) error {
	return toConnect(h.s.watch(ctx, req.Msg, stream))
}

func (s *Server) watch(ctx context.Context, m *v1.WatchRequest, stream *connect.ServerStream[v1.WatchResponse]) error {
	if err := s.check(); err != nil {
		return err
	}
	key := m.Key
	var notices <-chan struct{}
	if m.Prefix {
		p, err := allowPrefix(ctx, roleRead, key)
		if err != nil {
			return err
		}
		key = p
	} else {
		v, err := s.lockOf(ctx, roleRead, key, m.Kind, m.Permits)
		if err != nil {
			return err
		}
		if n, ok := v.store.(driver.Notifier); ok {
			ch, stop, err := n.Released(ctx, key)
			if err == nil {
				defer stop()
				notices = ch
			}
		}
	}
	w, stop := s.hub.watch(key, m.Prefix)
	defer stop()
	if err := stream.Send(&v1.WatchResponse{Message: &v1.WatchResponse_Watching{Watching: &v1.Watching{StoreNotices: notices != nil}}}); err != nil {
		return err
	}
	for {
		var e *v1.Event
		select {
		case e = <-w.ch:
		case _, ok := <-notices:
			if !ok {
				notices = nil // the store's subscription ended
				continue
			}
			e = &v1.Event{Type: v1.EventType_EVENT_TYPE_RELEASED, Key: key, Time: timestamppb.Now(), Source: v1.EventSource_EVENT_SOURCE_STORE, Kind: m.Kind}
		case <-w.over:
			return fmt.Errorf("%w: the watcher fell %d events behind; watch again", errTooManyStreams, watchBuffer)
		case <-s.drain:
			return errDraining
		case <-ctx.Done():
			return nil
		}
		if err := stream.Send(&v1.WatchResponse{Message: &v1.WatchResponse_Event{Event: e}}); err != nil {
			return err
		}
	}
}

package service

import (
	"context"

	"connectrpc.com/connect"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

func (h *locks) Queue(ctx context.Context, req *connect.Request[v1.AcquireRequest], stream *connect.ServerStream[v1.QueueResponse]) error {
	// The notes go out from their own goroutine, which stops before
	// the grant is sent.
	notes := startWaitNotes(ctx, func() error {
		return stream.Send(&v1.QueueResponse{Event: &v1.QueueResponse_Waiting{Waiting: &v1.Waiting{}}})
	}, func(n int) error {
		return stream.Send(&v1.QueueResponse{Event: &v1.QueueResponse_Position{Position: &v1.Position{Position: uint32(n)}}})
	})
	resp, err := h.s.acquire(ctx, req.Msg, notes.options(true)...)
	notes.stop()
	if err != nil {
		return toConnect(err)
	}
	if err := stream.Send(&v1.QueueResponse{Event: &v1.QueueResponse_Granted{Granted: resp}}); err != nil {
		// The caller went away with the grant on its way: an owner id of
		// the instance's own is given back; a caller's own is the
		// caller's (it releases what it asked for under it).
		if req.Msg.Owner == "" {
			if v, verr := h.s.views.get(kindKeyOf(resp.Lease)); verr == nil {
				h.s.giveBack(v, resp.Lease.Key, resp.Lease.Owner)
			}
		}
		return err
	}
	return nil
}

// kindKeyOf names the view of a lease the instance granted.
func kindKeyOf(l *v1.Lease) kindKey {
	k, _ := kindOf(l.Kind, l.Permits)
	return k
}

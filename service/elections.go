package service

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// elections implements the Elections service over the instance's
// Client of the plain lock: turnstile's elections, whose term is the
// leader's fencing token.
type elections struct{ s *Server }

// election checks a call on the election name and returns the plain
// lock's view.
func (s *Server) election(ctx context.Context, r role, name string) (*lockView, error) {
	return s.lockOf(ctx, r, name, v1.Kind_KIND_LOCK, 0)
}

func (h *elections) Campaign(ctx context.Context, req *connect.Request[v1.CampaignRequest], stream *connect.ServerStream[v1.CampaignResponse]) error {
	return toConnect(h.s.campaign(ctx, req.Msg, stream))
}

func (s *Server) campaign(ctx context.Context, m *v1.CampaignRequest, stream *connect.ServerStream[v1.CampaignResponse]) error {
	v, err := s.election(ctx, roleLock, m.Name)
	if err != nil {
		return err
	}
	ttl, err := s.ttlOf(m.Ttl, m.Ttl != nil)
	if err != nil {
		return err
	}
	leave, err := s.enterHold()
	if err != nil {
		return err
	}
	defer leave()
	obs := newHoldObserver()
	notes := startWaitNotes(ctx, func() error {
		return stream.Send(&v1.CampaignResponse{Event: &v1.CampaignResponse_Waiting{Waiting: &v1.Waiting{}}})
	}, nil)
	e, err := v.client.Election(m.Name, append(notes.options(false), turnstile.WithTTL(ttl), turnstile.WithObserver(obs))...)
	if err != nil {
		notes.stop()
		return err
	}
	// A candidate waits as long as the stream is open, unless it says.
	wctx, cancel, err := s.waitContext(ctx, m.Wait.AsDuration(), m.Wait != nil, true)
	if err != nil {
		return err
	}
	done := s.metrics.waiting()
	lead, err := e.Campaign(wctx, m.Value)
	done()
	cancel()
	notes.stop()
	if err != nil {
		return waitError(ctx, wctx, err)
	}
	l := lead.Lease()
	s.metrics.holding(1)
	defer s.metrics.holding(-1)
	elected := &v1.Elected{Lease: leaseOf(v, m.Name, l.Owner(), l.Token()), Term: lead.Term(), Ttl: durationpb.New(ttl), Validity: durationpb.New(l.Validity())}
	if err := stream.Send(&v1.CampaignResponse{Event: &v1.CampaignResponse_Elected{Elected: elected}}); err != nil {
		s.endHold(ctx, v, l)
		return err
	}
	s.event(v1.EventType_EVENT_TYPE_ACQUIRED, v, m.Name, l.Owner(), l.Token())
	return s.keep(ctx, v, l, ttl, obs, holdMessages{
		renewed: func(valid time.Duration) error {
			return stream.Send(&v1.CampaignResponse{Event: &v1.CampaignResponse_Renewed{Renewed: &v1.Renewed{Validity: durationpb.New(valid)}}})
		},
		lost: func(e *v1.Ended) error {
			return stream.Send(&v1.CampaignResponse{Event: &v1.CampaignResponse_Lost{Lost: e}})
		},
		draining: func(e *v1.Ended) error {
			return stream.Send(&v1.CampaignResponse{Event: &v1.CampaignResponse_Draining{Draining: e}})
		},
	})
}

func (h *elections) Leader(ctx context.Context, req *connect.Request[v1.LeaderRequest]) (*connect.Response[v1.LeaderResponse], error) {
	s := h.s
	v, err := s.election(ctx, roleRead, req.Msg.Name)
	if err != nil {
		return nil, toConnect(err)
	}
	e, err := v.client.Election(req.Msg.Name)
	if err != nil {
		return nil, toConnect(err)
	}
	ld, err := e.Leader(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.LeaderResponse{Leader: leaderOf(ld)}), nil
}

func (h *elections) Observe(ctx context.Context, req *connect.Request[v1.ObserveRequest], stream *connect.ServerStream[v1.ObserveResponse]) error {
	s, m := h.s, req.Msg
	v, err := s.election(ctx, roleRead, m.Name)
	if err != nil {
		return toConnect(err)
	}
	interval := m.Interval.AsDuration()
	if m.Interval != nil && (interval < 10*time.Millisecond || interval > time.Hour) {
		return toConnect(fmt.Errorf("%w: observe interval %v is not in [10ms, 1h]", turnstile.ErrInvalidOption, interval))
	}
	e, err := v.client.Election(m.Name)
	if err != nil {
		return toConnect(err)
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.life, cancel)
	defer stop()
	for ld, err := range e.Observe(octx, interval) {
		if err != nil {
			return toConnect(err)
		}
		if err := stream.Send(&v1.ObserveResponse{Leader: leaderOf(ld)}); err != nil {
			return err
		}
	}
	if s.draining.Load() && ctx.Err() == nil {
		return toConnect(errDraining)
	}
	return nil
}

func (h *elections) Resign(ctx context.Context, req *connect.Request[v1.ResignRequest]) (*connect.Response[v1.ResignResponse], error) {
	s, l := h.s, req.Msg.Lease
	if l != nil && l.Kind != v1.Kind_KIND_UNSPECIFIED && l.Kind != v1.Kind_KIND_LOCK {
		return nil, toConnect(fmt.Errorf("%w: an election's lease is of the plain lock, not %s", turnstile.ErrInvalidOption, l.Kind))
	}
	v, err := s.handleOf(ctx, l)
	if err != nil {
		return nil, toConnect(err)
	}
	// The observers try nothing: tell them in any case.
	ok, _, err := driver.ReleaseNotice(ctx, v.store, l.Key, l.Owner, driver.NoticeAlways)
	switch {
	case err != nil:
		return nil, toConnect(fmt.Errorf("resign %q: %w", l.Key, err))
	case !ok:
		return nil, toConnect(fmt.Errorf("resign %q: %w", l.Key, turnstile.ErrNotHeld))
	}
	s.event(v1.EventType_EVENT_TYPE_RELEASED, v, l.Key, l.Owner, l.Token)
	return connect.NewResponse(&v1.ResignResponse{}), nil
}

func leaderOf(l turnstile.Leader) *v1.Leader {
	return &v1.Leader{Elected: l.Elected, Value: l.Value, Term: l.Term, Owner: l.Owner}
}

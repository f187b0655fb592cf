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

// locks implements the Locks service's unary calls; hold.go, queue.go
// and watch.go have its streams.
type locks struct{ s *Server }

// acquireArgs checks an acquisition's request and returns its view, TTL
// and owner id (empty: the instance makes one).
func (s *Server) acquireArgs(ctx context.Context, m *v1.AcquireRequest) (*lockView, time.Duration, error) {
	v, err := s.lockOf(ctx, roleLock, m.Key, m.Kind, m.Permits)
	if err != nil {
		return nil, 0, err
	}
	ttl, err := s.ttlOf(m.Ttl, m.Ttl != nil)
	if err != nil {
		return nil, 0, err
	}
	if m.Owner != "" {
		if err := checkOwner(m.Owner); err != nil {
			return nil, 0, err
		}
	} else if v.key.kind == v1.Kind_KIND_REENTRANT {
		return nil, 0, fmt.Errorf("%w: a reentrant lock needs the owner id to re-enter with (owner)", turnstile.ErrInvalidOption)
	}
	return v, ttl, nil
}

func (h *locks) TryAcquire(ctx context.Context, req *connect.Request[v1.AcquireRequest]) (*connect.Response[v1.AcquireResponse], error) {
	resp, err := h.s.tryAcquire(ctx, req.Msg)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(resp), nil
}

func (s *Server) tryAcquire(ctx context.Context, m *v1.AcquireRequest) (*v1.AcquireResponse, error) {
	t, err := s.tryStart(ctx, m)
	if err != nil {
		return nil, err
	}
	token, ok, since, err := driver.AcquireSince(ctx, t.v.store, m.Key, t.owner, t.ttl)
	return s.tryEnd(t, token, ok, since, err)
}

// tryOp is a TryAcquire whose request passed its checks, on its way to
// the store.
type tryOp struct {
	m     *v1.AcquireRequest
	v     *lockView
	ttl   time.Duration
	owner string    // the request's, or one of the instance's
	sent  time.Time // before the store's call
}

// tryStart checks a TryAcquire's request and picks its owner id.
func (s *Server) tryStart(ctx context.Context, m *v1.AcquireRequest) (tryOp, error) {
	v, ttl, err := s.acquireArgs(ctx, m)
	if err != nil {
		return tryOp{}, err
	}
	owner := m.Owner
	if owner == "" {
		owner = s.newOwner()
	}
	return tryOp{m: m, v: v, ttl: ttl, owner: owner, sent: time.Now()}, nil
}

// tryEnd answers a TryAcquire from the store's answer.
func (s *Server) tryEnd(t tryOp, token uint64, ok bool, since time.Time, err error) (*v1.AcquireResponse, error) {
	m, v, sent := t.m, t.v, t.sent
	if !since.IsZero() && since.Before(sent) {
		// The store has held it since then (an etcd lease renewed
		// earlier): the lease counts from there, as a Client's does.
		sent = since
	}
	if err != nil {
		// The lock may have been taken: an owner id of our own is
		// released; a caller's own is the caller's to release.
		if m.Owner == "" {
			s.giveBack(v, m.Key, t.owner)
		}
		return nil, fmt.Errorf("try acquire %q: %w", m.Key, err)
	}
	if !ok {
		return nil, fmt.Errorf("try acquire %q: %w", m.Key, turnstile.ErrNotAcquired)
	}
	valid := validity(t.ttl, sent)
	if valid <= 0 {
		if m.Owner == "" {
			s.giveBack(v, m.Key, t.owner)
		}
		return nil, fmt.Errorf("try acquire %q: %w: the store took longer than the ttl %v to grant it", m.Key, turnstile.ErrNotAcquired, t.ttl)
	}
	s.event(v1.EventType_EVENT_TYPE_ACQUIRED, v, m.Key, t.owner, token)
	return grant(v, m.Key, t.owner, token, t.ttl, valid), nil
}

func (h *locks) Acquire(ctx context.Context, req *connect.Request[v1.AcquireRequest]) (*connect.Response[v1.AcquireResponse], error) {
	resp, err := h.s.acquire(ctx, req.Msg)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(resp), nil
}

// acquire waits for a lock on a caller's behalf through the instance's
// Client (its line, the store's notices or queue) and hands the lease
// over: the Client forgets it, the caller renews and releases it by its
// handle. opts are the call's own (notes on its wait).
func (s *Server) acquire(ctx context.Context, m *v1.AcquireRequest, opts ...turnstile.Option) (*v1.AcquireResponse, error) {
	v, ttl, err := s.acquireArgs(ctx, m)
	if err != nil {
		return nil, err
	}
	wctx, cancel, err := s.waitContext(ctx, m.Wait.AsDuration(), m.Wait != nil, false)
	if err != nil {
		return nil, err
	}
	defer cancel()
	done := s.metrics.waiting()
	l, err := v.client.Acquire(wctx, m.Key, append(waitOptions(ttl, m.Owner, false), opts...)...)
	done()
	if err != nil {
		return nil, waitError(ctx, wctx, err)
	}
	resp := grant(v, m.Key, l.Owner(), l.Token(), ttl, l.Validity())
	detach(l)
	if ctx.Err() != nil {
		// The caller went away as the lock came: nobody has its handle.
		if m.Owner == "" {
			s.giveBack(v, m.Key, l.Owner())
		}
		return nil, ctx.Err()
	}
	s.event(v1.EventType_EVENT_TYPE_ACQUIRED, v, m.Key, l.Owner(), l.Token())
	return resp, nil
}

func (h *locks) Extend(ctx context.Context, req *connect.Request[v1.ExtendRequest]) (*connect.Response[v1.ExtendResponse], error) {
	resp, err := h.s.extend(ctx, req.Msg)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(resp), nil
}

func (s *Server) extend(ctx context.Context, m *v1.ExtendRequest) (*v1.ExtendResponse, error) {
	v, ttl, err := s.extendStart(ctx, m)
	if err != nil {
		return nil, err
	}
	return s.extendOn(ctx, v, m.Lease, ttl)
}

// extendOn renews l for ttl on v's store, alone.
func (s *Server) extendOn(ctx context.Context, v *lockView, l *v1.Lease, ttl time.Duration) (*v1.ExtendResponse, error) {
	sent := time.Now()
	ok, err := v.store.Extend(ctx, l.Key, l.Owner, ttl)
	return s.extendEnd(v, l, ttl, sent, ok, err)
}

// extendStart checks an Extend's request and returns its view and TTL.
func (s *Server) extendStart(ctx context.Context, m *v1.ExtendRequest) (*lockView, time.Duration, error) {
	v, err := s.handleOf(ctx, m.Lease)
	if err != nil {
		return nil, 0, err
	}
	ttl, err := s.ttlOf(m.Ttl, m.Ttl != nil)
	if err != nil {
		return nil, 0, err
	}
	return v, ttl, nil
}

// extendEnd answers the renewal of l for ttl, sent to the store at sent.
func (s *Server) extendEnd(v *lockView, l *v1.Lease, ttl time.Duration, sent time.Time, ok bool, err error) (*v1.ExtendResponse, error) {
	switch {
	case err != nil:
		return nil, fmt.Errorf("extend %q: %w", l.Key, err)
	case !ok:
		return nil, fmt.Errorf("extend %q: %w", l.Key, turnstile.ErrNotHeld)
	}
	s.event(v1.EventType_EVENT_TYPE_EXTENDED, v, l.Key, l.Owner, l.Token)
	return &v1.ExtendResponse{Ttl: durationpb.New(ttl), Validity: durationpb.New(validity(ttl, sent))}, nil
}

func (h *locks) Release(ctx context.Context, req *connect.Request[v1.ReleaseRequest]) (*connect.Response[v1.ReleaseResponse], error) {
	resp, err := h.s.release(ctx, req.Msg)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(resp), nil
}

func (s *Server) release(ctx context.Context, m *v1.ReleaseRequest) (*v1.ReleaseResponse, error) {
	v, n, err := s.releaseStart(ctx, m)
	if err != nil {
		return nil, err
	}
	ok, tried, err := driver.ReleaseNotice(ctx, v.store, m.Lease.Key, m.Lease.Owner, n)
	return s.releaseEnd(v, m, ok, tried, err)
}

// releaseStart checks a Release's request and returns its view and
// when the release notice is to go out.
func (s *Server) releaseStart(ctx context.Context, m *v1.ReleaseRequest) (*lockView, driver.Notice, error) {
	v, err := s.handleOf(ctx, m.Lease)
	if err != nil {
		return nil, 0, err
	}
	if m.Notify {
		return v, driver.NoticeAlways, nil
	}
	return v, driver.NoticeIfTried, nil
}

// releaseEnd answers a Release from the store's answer.
func (s *Server) releaseEnd(v *lockView, m *v1.ReleaseRequest, ok, tried bool, err error) (*v1.ReleaseResponse, error) {
	l := m.Lease
	switch {
	case err != nil:
		return nil, fmt.Errorf("release %q: %w", l.Key, err)
	case !ok:
		return nil, fmt.Errorf("release %q: %w", l.Key, turnstile.ErrNotHeld)
	}
	s.event(v1.EventType_EVENT_TYPE_RELEASED, v, l.Key, l.Owner, l.Token)
	return &v1.ReleaseResponse{Tried: tried}, nil
}

func (h *locks) Status(ctx context.Context, req *connect.Request[v1.StatusRequest]) (*connect.Response[v1.StatusResponse], error) {
	m := req.Msg
	v, err := h.s.lockOf(ctx, roleRead, m.Key, m.Kind, m.Permits)
	if err != nil {
		return nil, toConnect(err)
	}
	st, err := v.client.Inspect(ctx, m.Key)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.StatusResponse{State: stateOf(st)}), nil
}

// maxListLimit bounds List's limit.
const maxListLimit = 10_000

func (h *locks) List(ctx context.Context, req *connect.Request[v1.ListRequest]) (*connect.Response[v1.ListResponse], error) {
	s, m := h.s, req.Msg
	if err := s.check(); err != nil {
		return nil, toConnect(err)
	}
	prefix, err := allowPrefix(ctx, roleRead, m.Prefix)
	if err != nil {
		return nil, toConnect(err)
	}
	k, err := kindOf(m.Kind, m.Permits)
	if err != nil {
		return nil, toConnect(err)
	}
	v, err := s.views.get(k)
	if err != nil {
		return nil, toConnect(err)
	}
	limit := int(m.Limit)
	if limit == 0 {
		limit = turnstile.DefaultListLimit
	}
	if limit > maxListLimit {
		return nil, toConnect(fmt.Errorf("%w: list limit %d is over %d", turnstile.ErrInvalidOption, limit, maxListLimit))
	}
	states, more, err := v.client.List(ctx, prefix, limit)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.ListResponse{More: more}
	for _, st := range states {
		out.Locks = append(out.Locks, stateOf(st))
	}
	return connect.NewResponse(out), nil
}

func (h *locks) ForceRelease(ctx context.Context, req *connect.Request[v1.ForceReleaseRequest]) (*connect.Response[v1.ForceReleaseResponse], error) {
	s, m := h.s, req.Msg
	v, err := s.lockOf(ctx, roleAdmin, m.Key, m.Kind, m.Permits)
	if err != nil {
		return nil, toConnect(err)
	}
	st, err := v.client.ForceRelease(ctx, m.Key)
	if err != nil {
		return nil, toConnect(err)
	}
	s.cfg.Logger.Warn("turnstile serve: forced release", "key", m.Key, "by", callerName(ctx), "held", st.Held, "fence_floor", st.Token)
	if st.Held {
		s.held.recheck(ctx, m.Key)
	}
	for _, hd := range st.Holders {
		s.event(v1.EventType_EVENT_TYPE_FORCE_RELEASED, v, m.Key, hd.Owner, max(hd.Token, st.Token))
	}
	if st.Held && len(st.Holders) == 0 {
		s.event(v1.EventType_EVENT_TYPE_FORCE_RELEASED, v, m.Key, "", st.Token)
	}
	return connect.NewResponse(&v1.ForceReleaseResponse{Removed: stateOf(st)}), nil
}

func (h *locks) Info(ctx context.Context, _ *connect.Request[v1.InfoRequest]) (*connect.Response[v1.InfoResponse], error) {
	s := h.s
	if err := allowRole(ctx, roleRead); err != nil {
		return nil, toConnect(err)
	}
	_, notices := s.cfg.Backend.(driver.Notifier)
	_, queue := s.cfg.Backend.(driver.Queuer)
	kinds, queued := s.views.kinds()
	return connect.NewResponse(&v1.InfoResponse{
		Store: driver.Name(s.cfg.Backend), Kinds: kinds, QueuedKinds: queued, StoreNotices: notices, StoreQueue: queue,
		Version: s.cfg.Version, Instance: s.cfg.Instance,
		DefaultTtl: durationpb.New(s.cfg.TTL), MaxWait: durationpb.New(s.cfg.MaxWait),
	}), nil
}

// stateOf is st as the API shows it.
func stateOf(st turnstile.LockState) *v1.LockState {
	out := &v1.LockState{Key: st.Key, Held: st.Held, Token: st.Token, Waiters: int32(max(-1, min(st.Waiters, 1<<31-1)))}
	for _, hd := range st.Holders {
		h := &v1.Holder{Owner: hd.Owner, Token: hd.Token}
		if hd.TTL < 0 {
			h.Session = true
		} else {
			h.Ttl = durationpb.New(hd.TTL)
		}
		out.Holders = append(out.Holders, h)
	}
	return out
}

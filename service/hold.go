package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// A held stream (Hold, Campaign) keeps a lease of the instance's Client,
// renewed by its watchdog, for as long as the stream is open. How it
// ends decides what happens to the lock (conn.go):
//
//	the lease is lost            Lost, then FAILED_PRECONDITION LOCK_LOST
//	the client closed the stream released at once
//	the client went silent       no longer renewed: expires within its TTL
//	the instance drains          Draining with the lease, no longer
//	                             renewed: the client resumes it elsewhere

// holdMessages sends what a held stream tells its client.
type holdMessages struct {
	renewed  func(valid time.Duration) error
	lost     func(e *v1.Ended) error
	draining func(e *v1.Ended) error
}

// holdObserver hears of its lease's renewals without ever blocking the
// watchdog: a renewal waits in a one-slot mailbox for the stream.
type holdObserver struct {
	renewed chan struct{}
}

func newHoldObserver() *holdObserver { return &holdObserver{renewed: make(chan struct{}, 1)} }

// Observe implements turnstile.Observer.
func (o *holdObserver) Observe(e turnstile.Event) {
	if e.Type == turnstile.EventExtended {
		select {
		case o.renewed <- struct{}{}:
		default:
		}
	}
}

// enterHold counts a held stream against MaxHolds.
func (s *Server) enterHold() (leave func(), err error) {
	if n := s.holds.Add(1); n > int64(s.cfg.MaxHolds) {
		s.holds.Add(-1)
		return nil, fmt.Errorf("%w: the instance holds %d leases for streams, its limit (--max-holds)", errTooManyStreams, s.cfg.MaxHolds)
	}
	return func() { s.holds.Add(-1) }, nil
}

func (h *locks) Hold(ctx context.Context, req *connect.Request[v1.HoldRequest], stream *connect.ServerStream[v1.HoldResponse]) error {
	return toConnect(h.s.hold(ctx, req.Msg, stream))
}

func (s *Server) hold(ctx context.Context, m *v1.HoldRequest, stream *connect.ServerStream[v1.HoldResponse]) error {
	a := &v1.AcquireRequest{Key: m.Key, Kind: m.Kind, Permits: m.Permits, Ttl: m.Ttl, Wait: m.Wait}
	if r := m.Resume; r != nil {
		a.Key, a.Kind, a.Permits, a.Owner = r.Key, r.Kind, r.Permits, r.Owner
		if err := checkOwner(r.Owner); err != nil {
			return err
		}
	}
	v, ttl, err := s.acquireArgs(ctx, a)
	if err != nil {
		return err
	}
	leave, err := s.enterHold()
	if err != nil {
		return err
	}
	defer leave()
	obs := newHoldObserver()
	var l *turnstile.Lease
	if m.Resume != nil {
		l, err = s.resume(ctx, v, a, ttl, obs)
	} else {
		notes := startWaitNotes(ctx, func() error {
			return stream.Send(&v1.HoldResponse{Event: &v1.HoldResponse_Waiting{Waiting: &v1.Waiting{}}})
		}, func(n int) error {
			return stream.Send(&v1.HoldResponse{Event: &v1.HoldResponse_Queued{Queued: &v1.Position{Position: uint32(n)}}})
		})
		l, err = s.waitHeld(ctx, v, a, ttl, append(notes.options(m.Positions), turnstile.WithObserver(obs)))
		notes.stop()
	}
	if err != nil {
		return err
	}
	s.metrics.holding(1)
	defer s.metrics.holding(-1)
	granted := grant(v, a.Key, l.Owner(), l.Token(), ttl, l.Validity())
	if err := stream.Send(&v1.HoldResponse{Event: &v1.HoldResponse_Granted{Granted: granted}}); err != nil {
		s.endHold(ctx, v, l)
		return err
	}
	s.event(v1.EventType_EVENT_TYPE_ACQUIRED, v, a.Key, l.Owner(), l.Token())
	return s.keep(ctx, v, l, ttl, obs, holdMessages{
		renewed: func(valid time.Duration) error {
			return stream.Send(&v1.HoldResponse{Event: &v1.HoldResponse_Renewed{Renewed: &v1.Renewed{Validity: durationpb.New(valid)}}})
		},
		lost: func(e *v1.Ended) error {
			return stream.Send(&v1.HoldResponse{Event: &v1.HoldResponse_Lost{Lost: e}})
		},
		draining: func(e *v1.Ended) error {
			return stream.Send(&v1.HoldResponse{Event: &v1.HoldResponse_Draining{Draining: e}})
		},
	})
}

// waitHeld waits for a lock whose lease the instance will renew.
func (s *Server) waitHeld(ctx context.Context, v *lockView, a *v1.AcquireRequest, ttl time.Duration, opts []turnstile.Option) (*turnstile.Lease, error) {
	wctx, cancel, err := s.waitContext(ctx, a.Wait.AsDuration(), a.Wait != nil, false)
	if err != nil {
		return nil, err
	}
	defer cancel()
	done := s.metrics.waiting()
	l, err := v.client.Acquire(wctx, a.Key, append(waitOptions(ttl, a.Owner, true), opts...)...)
	done()
	if err != nil {
		return nil, waitError(ctx, wctx, err)
	}
	return l, nil
}

// resume takes over a lease taken before, if its owner still holds it:
// the renewal proves it was held all along, and a grant under the same
// owner id (a retry, for the store) gives this instance a lease of its
// own to renew, with a new token.
func (s *Server) resume(ctx context.Context, v *lockView, a *v1.AcquireRequest, ttl time.Duration, obs *holdObserver) (*turnstile.Lease, error) {
	if v.key.kind == v1.Kind_KIND_REENTRANT {
		return nil, fmt.Errorf("%w: a reentrant lease cannot be resumed: taking it again would count once more", turnstile.ErrUnsupported)
	}
	ok, err := v.store.Extend(ctx, a.Key, a.Owner, ttl)
	switch {
	case err != nil:
		return nil, fmt.Errorf("resume %q: %w", a.Key, err)
	case !ok:
		return nil, fmt.Errorf("resume %q: %w", a.Key, turnstile.ErrNotHeld)
	}
	l, err := v.client.TryAcquire(ctx, a.Key, turnstile.WithTTL(ttl), turnstile.WithOwner(a.Owner), turnstile.WithObserver(obs))
	if errors.Is(err, turnstile.ErrNotAcquired) {
		// Lost between the renewal and the grant.
		return nil, fmt.Errorf("resume %q: %w", a.Key, turnstile.ErrNotHeld)
	}
	return l, err
}

// keep holds l for a stream until the stream, the lease or the instance
// ends it (see the top of this file).
func (s *Server) keep(ctx context.Context, v *lockView, l *turnstile.Lease, ttl time.Duration, obs *holdObserver, send holdMessages) error {
	key := l.Key()
	defer s.held.add(l, ttl)()
	for {
		select {
		case <-obs.renewed:
			if err := send.renewed(l.Validity()); err != nil {
				s.endHold(ctx, v, l)
				return err
			}
		case <-l.Context().Done():
			cause := context.Cause(l.Context())
			if errors.Is(cause, turnstile.ErrClosed) {
				_ = send.draining(&v1.Ended{Reason: v1.ErrorReason_DRAINING.String(), Message: "the instance is shutting down; the lease is no longer renewed", Lease: leaseOf(v, key, l.Owner(), l.Token())})
				return errDraining
			}
			s.event(v1.EventType_EVENT_TYPE_LOST, v, key, l.Owner(), l.Token())
			_ = send.lost(&v1.Ended{Reason: v1.ErrorReason_LOCK_LOST.String(), Message: cause.Error()})
			return withReason(connect.CodeFailedPrecondition, v1.ErrorReason_LOCK_LOST, fmt.Errorf("%q: %w", key, cause))
		case <-s.drain:
			detach(l)
			_ = send.draining(&v1.Ended{Reason: v1.ErrorReason_DRAINING.String(),
				Message: "the instance is draining: the lease is no longer renewed here; resume it on another instance within its validity",
				Lease:   leaseOf(v, key, l.Owner(), l.Token())})
			return errDraining
		case <-ctx.Done():
			s.endHold(ctx, v, l)
			return ctx.Err()
		}
	}
}

// endHold ends a stream's lease whose stream is over: released if its
// client closed the stream, otherwise (the client went silent) only no
// longer renewed, so that it expires within its TTL.
func (s *Server) endHold(ctx context.Context, v *lockView, l *turnstile.Lease) {
	if !clientClosed(ctx) {
		detach(l)
		s.cfg.Logger.Info("turnstile serve: a holder went silent; its lease is no longer renewed and expires within its TTL", "key", l.Key(), "by", callerName(ctx))
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := l.Release(rctx); err != nil && !errors.Is(err, turnstile.ErrNotHeld) {
		s.cfg.Logger.Warn("turnstile serve: could not release a closed stream's lease; it expires after its TTL", "key", l.Key(), "err", err)
		return
	}
	s.event(v1.EventType_EVENT_TYPE_RELEASED, v, l.Key(), l.Owner(), l.Token())
}

// waitNotes sends what a stream says while its call waits for a lock:
// Waiting once the Client starts waiting, and the places in line. They
// go out from a goroutine of their own (the Client's observers and a
// Queuer's position function must not block), the latest place only
// when the stream is slower than they change; stop waits for that
// goroutine, so that the caller may send on the stream again.
type waitNotes struct {
	waiting chan struct{}
	latest  chan int
	quit    chan struct{}
	done    chan struct{}
}

func startWaitNotes(ctx context.Context, sendWaiting func() error, sendPosition func(int) error) *waitNotes {
	w := &waitNotes{waiting: make(chan struct{}, 1), latest: make(chan int, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		said := false
		for {
			var err error
			select {
			case <-w.waiting:
				if !said {
					said = true
					err = sendWaiting()
				}
			case n := <-w.latest:
				if sendPosition != nil {
					err = sendPosition(n)
				}
			case <-w.quit:
				return
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return w
}

// Observe implements turnstile.Observer: EventWaiting is the Client
// starting to wait.
func (w *waitNotes) Observe(e turnstile.Event) {
	if e.Type == turnstile.EventWaiting {
		select {
		case w.waiting <- struct{}{}:
		default:
		}
	}
}

// position is a Queuer's position function.
func (w *waitNotes) position(n int) {
	for {
		select {
		case w.latest <- n:
			return
		default:
		}
		select {
		case <-w.latest: // replaced by the newer place
		default:
		}
	}
}

// options are the per-call options that feed w.
func (w *waitNotes) options(positions bool) []turnstile.Option {
	opts := []turnstile.Option{turnstile.WithObserver(w)}
	if positions {
		opts = append(opts, turnstile.WithQueuePosition(w.position))
	}
	return opts
}

func (w *waitNotes) stop() { close(w.quit); <-w.done }

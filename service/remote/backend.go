// Package remote is a turnstile backend over the turnstile lock service
// (turnstile serve): the store behind the service holds the locks, and
// this package reaches it through any of the service's instances.
// Importing it registers the schemes turnstile:// and turnstiles://
// (url.go says what the URLs hold):
//
//	import _ "github.com/turnstilelock/turnstile/service/remote"
//
//	c, err := turnstile.Open(ctx, "turnstile://orders:SECRET@10.0.0.5:7070,10.0.0.6:7070")
//
// A Client over it works as over the store itself: the fencing tokens
// are the store's, its watchdog renews leases through the service
// (Extend, by owner id: any instance will do), and an instance that
// fails or drains is left for the next (client.go). What it can offer of
// the store's capabilities:
//
//   - the lock kinds the store has (Info), as views, as the store's
//     backend offers them;
//   - driver.Queuer for each kind whose waiters the store queues itself
//     (etcd's and ZooKeeper's kinds, a fair view; Info's queued_kinds):
//     the wait is the service's (Acquire), in the store's queue, with no
//     polling — which is also what lets a writer in past a stream of
//     readers;
//   - driver.Notifier through Watch: the instance's own events for the
//     key and, on a store that sends release notices, the store's. A
//     notice may be lost, as the Notifier contract allows: the Client's
//     backoff timer is the safety net;
//   - driver.Inspector, driver.ForceReleaser, as the store has them (an
//     operation the store lacks gives ErrUnsupported);
//   - driver.NoticeReleaser: the store's own, or where it has none its
//     Release, which tells every time.
//
// It does not offer driver.TokenRoom: a Client over it never hands a
// lock to its own next waiter without the service.
package remote

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

func init() {
	turnstile.Register("turnstile", open)
	turnstile.Register("turnstiles", open)
}

// open is what turnstile.Open calls for a turnstile:// URL. The Client's
// settings in the driver.OpenConfig need no agreement here: its TTL goes
// with every call, and the store behind the service judges it there.
func open(ctx context.Context, u *url.URL, _ driver.OpenConfig) (driver.Backend, error) {
	cfg, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, cfg)
}

// Backend is the plain lock of the store behind the service, or one of
// its views. Views share their connections; Close on any closes them.
type Backend struct {
	c       *conn
	info    *v1.InfoResponse
	kind    v1.Kind
	permits uint32
}

// QueuedBackend is a Backend whose store queues its waiters: Acquire
// waits in that queue, through the service.
type QueuedBackend struct {
	*Backend
}

// Dial connects to the service's instances and asks one of them what its
// store offers.
func Dial(ctx context.Context, cfg Config) (driver.Backend, error) {
	if len(cfg.Hosts) == 0 {
		return nil, fmt.Errorf("%w: no instance to connect to", turnstile.ErrInvalidURL)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	c := newConn(cfg)
	ictx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	info, err := call(ictx, c, func(in *instance) (*v1.InfoResponse, error) {
		r, err := in.locks.Info(ictx, connect.NewRequest(&v1.InfoRequest{}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	})
	if err != nil {
		c.close()
		return nil, fmt.Errorf("turnstile service %s: %w", c.name, asDriverError(err))
	}
	return view(&Backend{c: c, info: info, kind: v1.Kind_KIND_LOCK}), nil
}

// view returns b as its type: a QueuedBackend where its kind's waiters
// queue in the store, as Info says.
func view(b *Backend) driver.Backend {
	if slices.Contains(b.info.QueuedKinds, b.kind) {
		return &QueuedBackend{b}
	}
	return b
}

// Name implements driver.Namer: "turnstile h1:7070,h2:7070 (redis
// 10.0.0.9:6379)", the kind after it for a view.
func (b *Backend) Name() string {
	n := fmt.Sprintf("turnstile %s (%s)", b.c.name, b.info.Store)
	if b.kind != v1.Kind_KIND_LOCK {
		n += " " + b.kind.String()
	}
	return n
}

// Shared implements driver.Shared.
func (b *Backend) Shared() bool {
	return b.kind == v1.Kind_KIND_SHARED || b.kind == v1.Kind_KIND_SEMAPHORE
}

// Close closes the connections to the instances.
func (b *Backend) Close() error {
	b.c.close()
	return nil
}

func (b *Backend) lease(key, owner string) *v1.Lease {
	return &v1.Lease{Key: key, Owner: owner, Kind: b.kind, Permits: b.permits}
}

// Acquire implements driver.Backend: one attempt (TryAcquire), under
// owner.
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	req := &v1.AcquireRequest{Key: key, Kind: b.kind, Permits: b.permits, Ttl: durationpb.New(ttl), Owner: owner}
	r, err := b.c.ops.do(ctx, &v1.BatchOp{Op: &v1.BatchOp_TryAcquire{TryAcquire: req}})
	if err == nil {
		if opReason(r, v1.ErrorReason_NOT_ACQUIRED) {
			return 0, false, nil
		}
		err = opError(r)
	}
	switch {
	case err == nil:
		return r.GetAcquired().GetLease().GetToken(), true, nil
	case isReason(err, v1.ErrorReason_NOT_ACQUIRED):
		return 0, false, nil
	}
	return 0, false, asDriverError(err)
}

// Extend implements driver.Backend.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	req := &v1.ExtendRequest{Lease: b.lease(key, owner), Ttl: durationpb.New(ttl)}
	r, err := b.c.ops.do(ctx, &v1.BatchOp{Op: &v1.BatchOp_Extend{Extend: req}})
	if err == nil {
		if opReason(r, v1.ErrorReason_NOT_HELD) {
			return false, nil
		}
		err = opError(r)
	}
	return heldResult(err)
}

// ExtendMany implements driver.BatchExtender: the watchdog's renewals
// that fall due together go in one Batch call (or a few, of at most 1024
// each).
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	for start := 0; start < len(reqs); start += maxOps {
		chunk := reqs[start:min(len(reqs), start+maxOps)]
		ops := make([]*v1.BatchOp, len(chunk))
		for i, r := range chunk {
			ops[i] = &v1.BatchOp{Op: &v1.BatchOp_Extend{Extend: &v1.ExtendRequest{Lease: b.lease(r.Key, r.Owner), Ttl: durationpb.New(r.TTL)}}}
		}
		results, err := b.c.batch(ctx, ops)
		for i := range chunk {
			if err != nil {
				out[start+i].Err = asDriverError(err)
				continue
			}
			if opReason(results[i], v1.ErrorReason_NOT_HELD) {
				continue
			}
			out[start+i].OK, out[start+i].Err = heldResult(opError(results[i]))
		}
	}
	return out
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	ok, _, err := b.ReleaseNotice(ctx, key, owner, driver.NoticeIfTried)
	return ok, err
}

// ReleaseNotice implements driver.NoticeReleaser: the instance releases
// through the store's own ReleaseNotice, and says whether someone else
// had tried the lock.
func (b *Backend) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	req := &v1.ReleaseRequest{Lease: b.lease(key, owner), Notify: n == driver.NoticeAlways}
	r, err := b.c.ops.do(ctx, &v1.BatchOp{Op: &v1.BatchOp_Release{Release: req}})
	if err == nil {
		if opReason(r, v1.ErrorReason_NOT_HELD) {
			return false, false, nil
		}
		err = opError(r)
	}
	ok, err = heldResult(err)
	return ok, ok && r.GetReleased().GetTried(), err
}

// heldResult reads an Extend's or Release's outcome as the driver's.
func heldResult(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case isReason(err, v1.ErrorReason_NOT_HELD):
		return false, nil
	}
	return false, asDriverError(err)
}

// AcquireWait implements driver.Queuer: the service waits in the store's
// queue, until ctx is done (its deadline travels with the call), and
// streams the places in line when ctx carries a driver.PositionFunc.
func (q *QueuedBackend) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	b := q.Backend
	req := &v1.AcquireRequest{Key: key, Kind: b.kind, Permits: b.permits, Ttl: durationpb.New(ttl), Owner: owner}
	if dl, ok := ctx.Deadline(); ok {
		req.Wait = durationpb.New(max(0, time.Until(dl)))
	}
	position := driver.PositionFunc(ctx)
	resp, err := call(ctx, b.c, func(in *instance) (*v1.AcquireResponse, error) {
		if position == nil {
			r, err := in.locks.Acquire(ctx, connect.NewRequest(req))
			if err != nil {
				return nil, err
			}
			return r.Msg, nil
		}
		return queue(ctx, in, req, position)
	})
	if err != nil {
		// The lock may have come as the wait ended: an owner id is never
		// reused, so releasing it frees nobody else's lock.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultDialTimeout)
		_, _ = b.Release(rctx, key, owner)
		cancel()
		awaitOwnDeadline(ctx, err)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%w (%w)", context.Cause(ctx), asDriverError(err))
		}
		if isReason(err, v1.ErrorReason_NOT_ACQUIRED) {
			return 0, fmt.Errorf("%w: %w", turnstile.ErrNotAcquired, err)
		}
		return 0, asDriverError(err)
	}
	return resp.GetLease().GetToken(), nil
}

// deadlineSlack bounds how long before ctx's own deadline an instance's
// DEADLINE_EXCEEDED is taken for it (awaitOwnDeadline).
const deadlineSlack = 5 * time.Millisecond

// awaitOwnDeadline waits for ctx to end when err is the instance's
// DEADLINE_EXCEEDED and ctx's deadline is at most deadlineSlack away: a
// call's deadline travels to the instance in whole milliseconds, rounded
// down, so the instance's copy may end up to a millisecond before ctx
// does, and its answer arrive first. The caller then reads ctx's end (a
// wait's budget, say) as what ended the call, as it would have without
// the rounding.
func awaitOwnDeadline(ctx context.Context, err error) {
	if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		return
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= deadlineSlack {
		<-ctx.Done()
	}
}

// queue waits with the Queue stream, telling position the places it
// streams.
func queue(ctx context.Context, in *instance, req *v1.AcquireRequest, position func(int)) (*v1.AcquireResponse, error) {
	s, err := in.locks.Queue(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for s.Receive() {
		switch e := s.Msg().Event.(type) {
		case *v1.QueueResponse_Position:
			position(int(e.Position.GetPosition()))
		case *v1.QueueResponse_Granted:
			return e.Granted, nil
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: the service ended the wait without a grant", turnstile.ErrNotAcquired)
}

// has reports whether the store behind the service has kind.
func (b *Backend) has(kind v1.Kind) bool { return slices.Contains(b.info.Kinds, kind) }

func (b *Backend) noKind(what string) error {
	return fmt.Errorf("%w: %s has no %s", turnstile.ErrUnsupported, b.Name(), what)
}

// kindSettings checks the settings a view is made with. The waiting
// mechanisms' settings (writer claim, waiter timeout, poll interval) are
// the service's, the same for each of its clients, so a view that asks
// for others is refused rather than made with settings it would not have.
func kindSettings(cfg driver.KindConfig) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if cfg.WriterClaim != 0 || cfg.WaiterTimeout != 0 || cfg.PollInterval != 0 {
		return fmt.Errorf("%w: through turnstile:// a lock kind's writer claim, waiter timeout and poll interval are the service's; leave them unset", turnstile.ErrInvalidOption)
	}
	return nil
}

// ReentrantView implements driver.Reentranter.
func (b *Backend) ReentrantView(cfg driver.KindConfig) (driver.Backend, error) {
	if err := kindSettings(cfg); err != nil {
		return nil, err
	}
	if !b.has(v1.Kind_KIND_REENTRANT) {
		return nil, b.noKind("reentrant lock")
	}
	return view(&Backend{c: b.c, info: b.info, kind: v1.Kind_KIND_REENTRANT}), nil
}

// SemaphoreView implements driver.Semaphorer.
func (b *Backend) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	if err := driver.CheckPermits(cfg.Permits); err != nil {
		return nil, err
	}
	if err := kindSettings(cfg); err != nil {
		return nil, err
	}
	if !b.has(v1.Kind_KIND_SEMAPHORE) {
		return nil, b.noKind("semaphore")
	}
	return view(&Backend{c: b.c, info: b.info, kind: v1.Kind_KIND_SEMAPHORE, permits: uint32(cfg.Permits)}), nil
}

// ReadWriteView implements driver.ReadWriter.
func (b *Backend) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	if err := kindSettings(cfg); err != nil {
		return nil, nil, err
	}
	if !b.has(v1.Kind_KIND_SHARED) {
		return nil, nil, b.noKind("read-write lock")
	}
	return view(&Backend{c: b.c, info: b.info, kind: v1.Kind_KIND_SHARED}),
		view(&Backend{c: b.c, info: b.info, kind: v1.Kind_KIND_EXCLUSIVE}), nil
}

// FairView implements driver.Fairer.
func (b *Backend) FairView(cfg driver.KindConfig) (driver.Backend, error) {
	if err := kindSettings(cfg); err != nil {
		return nil, err
	}
	if !b.has(v1.Kind_KIND_FAIR) {
		return nil, b.noKind("fair lock")
	}
	return view(&Backend{c: b.c, info: b.info, kind: v1.Kind_KIND_FAIR}), nil
}

// The kinds a store behind the service may have.
var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
	_ driver.Fairer      = (*Backend)(nil)
)

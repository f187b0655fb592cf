package remote

import (
	"context"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile/driver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// Inspect implements driver.Inspector (Status).
func (b *Backend) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	req := &v1.StatusRequest{Key: key, Kind: b.kind, Permits: b.permits}
	st, err := call(ctx, b.c, func(in *instance) (*v1.LockState, error) {
		r, err := in.locks.Status(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return r.Msg.GetState(), nil
	})
	if err != nil {
		return driver.LockState{}, asDriverError(err)
	}
	return stateOf(st), nil
}

// List implements driver.Inspector.
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	req := &v1.ListRequest{Prefix: prefix, Limit: uint32(max(0, min(limit, 1<<31-1))), Kind: b.kind, Permits: b.permits}
	resp, err := call(ctx, b.c, func(in *instance) (*v1.ListResponse, error) {
		r, err := in.locks.List(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	})
	if err != nil {
		return nil, false, asDriverError(err)
	}
	out := make([]driver.LockState, 0, len(resp.Locks))
	for _, st := range resp.Locks {
		out = append(out, stateOf(st))
	}
	return out, resp.More, nil
}

// ForceRelease implements driver.ForceReleaser (admin role).
func (b *Backend) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	req := &v1.ForceReleaseRequest{Key: key, Kind: b.kind, Permits: b.permits}
	st, err := call(ctx, b.c, func(in *instance) (*v1.LockState, error) {
		r, err := in.locks.ForceRelease(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return r.Msg.GetRemoved(), nil
	})
	if err != nil {
		return driver.LockState{}, asDriverError(err)
	}
	return stateOf(st), nil
}

func stateOf(st *v1.LockState) driver.LockState {
	out := driver.LockState{Key: st.GetKey(), Held: st.GetHeld(), Token: st.GetToken(), Waiters: int(st.GetWaiters())}
	for _, h := range st.GetHolders() {
		hd := driver.Holder{Owner: h.Owner, Token: h.Token, TTL: -1}
		if !h.Session {
			hd.TTL = h.Ttl.AsDuration()
		}
		out.Holders = append(out.Holders, hd)
	}
	return out
}

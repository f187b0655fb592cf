package locktest

// ---------------------------------------------------------------------
// CAPABILITY FORWARDING of the randomized checker (RunRandom).
//
// The Client finds a backend's optional capabilities by type assertion,
// so the faulty wrapper (faults.go) must offer exactly those of the
// store under test: one it offered and the store lacks would be called,
// one it hid would change how the Client works. A Go type's methods are
// fixed, so the wrapper comes in layers, each a type that forwards a set
// of capabilities, one method per capability method; wrap picks the
// layer whose set is the store's. When the driver's capabilities change,
// this file is the one to change: drop or add a method, and the set of
// its layer in layers.
// ---------------------------------------------------------------------

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/turnstilelock/turnstile/driver"
)

// capability names one optional interface of package driver.
type capability string

// has reports whether b offers each capability the Client may use.
var has = map[capability]func(driver.Backend) bool{
	"Inspector":     func(b driver.Backend) bool { _, ok := b.(driver.Inspector); return ok },
	"ForceReleaser": func(b driver.Backend) bool { _, ok := b.(driver.ForceReleaser); return ok },
	"BatchExtender": func(b driver.Backend) bool { _, ok := b.(driver.BatchExtender); return ok },
	"Fencer":        func(b driver.Backend) bool { _, ok := b.(driver.Fencer); return ok },
	"TokenRoom": func(b driver.Backend) bool {
		r, ok := b.(driver.TokenRoom)
		return ok && r.TokenRoom() > 1 // the Client ignores less
	},
	"NoticeReleaser": func(b driver.Backend) bool { _, ok := b.(driver.NoticeReleaser); return ok },
	"Notifier":       func(b driver.Backend) bool { _, ok := b.(driver.Notifier); return ok },
	// Stores whose locks may have several holders are not for this
	// checker, whose oracle counts holders of exclusive locks; nor are
	// stores that queue waiters themselves (Acquire waits in the store).
	"Shared": func(b driver.Backend) bool { s, ok := b.(driver.Shared); return ok && s.Shared() },
	"Queuer": func(b driver.Backend) bool { _, ok := b.(driver.Queuer); return ok },
}

// layers are the wrapper's types and the capabilities each forwards.
var layers = []struct {
	caps []capability
	make func(*faulty) driver.Backend
}{
	{[]capability{"Inspector", "ForceReleaser", "BatchExtender", "Fencer"},
		func(f *faulty) driver.Backend { return coreCaps{f} }},
	{[]capability{"Inspector", "ForceReleaser", "BatchExtender", "Fencer", "TokenRoom"},
		func(f *faulty) driver.Backend { return roomCaps{coreCaps{f}} }},
	{[]capability{"Inspector", "ForceReleaser", "BatchExtender", "Fencer", "TokenRoom", "NoticeReleaser", "Notifier"},
		func(f *faulty) driver.Backend { return fullCaps{roomCaps{coreCaps{f}}} }},
}

// wrap returns f as a backend with exactly the capabilities of f.base.
func wrap(f *faulty) (driver.Backend, error) {
	var offered []capability
	for c, ok := range has {
		if ok(f.base) {
			offered = append(offered, c)
		}
	}
	slices.Sort(offered)
	for _, l := range layers {
		want := slices.Clone(l.caps)
		slices.Sort(want)
		if slices.Equal(want, offered) {
			return l.make(f), nil
		}
	}
	names := make([]string, len(offered))
	for i, c := range offered {
		names[i] = string(c)
	}
	return nil, fmt.Errorf("locktest: %s offers [%s]; no layer of locktest/capabilities.go forwards exactly those", driver.Name(f.base), strings.Join(names, " "))
}

// coreCaps: Inspector, ForceReleaser, BatchExtender, Fencer (the memory
// backend's set), and Namer.
type coreCaps struct{ *faulty }

func (c coreCaps) Name() string { return "faulty " + driver.Name(c.base) }

// HoldsTTL forwards driver.TTLHolder as the store answers it: a bool,
// not a set of methods, so every layer can offer it.
func (c coreCaps) HoldsTTL() bool { return driver.HoldsTTL(c.base) }

func (c coreCaps) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return c.inspect(ctx, key)
}

func (c coreCaps) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return c.base.(driver.Inspector).List(ctx, prefix, limit)
}

func (c coreCaps) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return c.forceRelease(ctx, key)
}

// ExtendMany meets one fault for the whole batch, as one round trip does.
func (c coreCaps) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	var res []driver.ExtendResult
	err := c.do(ctx, opRenew, func(ctx context.Context) error {
		res = c.base.(driver.BatchExtender).ExtendMany(ctx, reqs)
		return nil
	})
	if err != nil {
		res = make([]driver.ExtendResult, len(reqs))
		for i := range res {
			res[i].Err = err
		}
	}
	return res
}

func (c coreCaps) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	return c.base.(driver.Fencer).RaiseFence(ctx, key, owner, token)
}

// roomCaps adds TokenRoom.
type roomCaps struct{ coreCaps }

func (c roomCaps) TokenRoom() uint64 { return c.base.(driver.TokenRoom).TokenRoom() }

// fullCaps adds NoticeReleaser and Notifier (the redis backend's set).
type fullCaps struct{ roomCaps }

func (c fullCaps) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	ok, err = c.release(ctx, func(ctx context.Context) (bool, error) {
		var err error
		ok, tried, err = c.base.(driver.NoticeReleaser).ReleaseNotice(ctx, key, owner, n)
		return ok, err
	})
	return ok, tried, err
}

func (c fullCaps) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return c.base.(driver.Notifier).Released(ctx, key)
}

package redis

import (
	"context"
	_ "embed" // the Lua script
	"fmt"
	"strconv"

	"github.com/turnstilelock/turnstile"
)

//go:embed raise_guard.lua
var raiseGuardLua string

var raiseGuardScript = newKindScript(raiseGuardLua)

// RaiseGuard raises the guard key of package fence for resource key
// (GuardKey), if it exists, to at least floor, and reports whether it
// changed it; a missing guard key stays missing. ForceRelease raises the
// guard to its own fence floor already. A Redlock's forced release calls
// RaiseGuard on the nodes whose own floor was below the Redlock's (they
// missed the removed holder's grant), so that a guard kept on any node
// refuses every token the removed holder may carry. floor must lie in
// [1, 2^53), as every token does.
func (b *Backend) RaiseGuard(ctx context.Context, key string, floor uint64) (bool, error) {
	if err := check(ctx, key); err != nil {
		return false, err
	}
	if floor == 0 || floor >= maxToken {
		return false, fmt.Errorf("%w: guard floor %d is outside [1, 2^53)", turnstile.ErrInvalidOption, floor)
	}
	n, err := b.run(ctx, raiseGuardScript, call{keys: []string{b.GuardKey(key)}, args: []string{strconv.FormatUint(floor, 10)}})
	return n == 1, err
}

// RaiseGuard implements what Backend.RaiseGuard does, for the fair view.
func (f *Fair) RaiseGuard(ctx context.Context, key string, floor uint64) (bool, error) {
	return f.b.RaiseGuard(ctx, key, floor)
}

// RaiseGuard implements what Backend.RaiseGuard does, for the reentrant
// view: every kind of a key shares its guard.
func (r *Reentrant) RaiseGuard(ctx context.Context, key string, floor uint64) (bool, error) {
	return r.b.RaiseGuard(ctx, key, floor)
}

// RaiseGuard implements what Backend.RaiseGuard does, for the read side.
func (r *ReadLock) RaiseGuard(ctx context.Context, key string, floor uint64) (bool, error) {
	return r.rw.b.RaiseGuard(ctx, key, floor)
}

// RaiseGuard implements what Backend.RaiseGuard does, for the write side.
func (w *WriteLock) RaiseGuard(ctx context.Context, key string, floor uint64) (bool, error) {
	return w.rw.b.RaiseGuard(ctx, key, floor)
}

// RaiseGuard implements what Backend.RaiseGuard does, for the semaphore.
func (s *Semaphore) RaiseGuard(ctx context.Context, key string, floor uint64) (bool, error) {
	return s.b.RaiseGuard(ctx, key, floor)
}

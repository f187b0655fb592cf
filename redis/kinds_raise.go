package redis

import (
	"context"
	_ "embed" // the Lua script
	"fmt"
	"strconv"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

//go:embed kind_raise.lua
var kindRaiseLua string

var kindRaise = newKindScript(kindRaiseLua)

// The reentrant lock and both sides of the read-write lock raise their
// key's fence as the plain lock does, so that a Redlock of such views
// (redlock.Backend's ReentrantView and ReadWriteView) writes its tokens
// back to a quorum.
var (
	_ driver.Fencer = (*Reentrant)(nil)
	_ driver.Fencer = (*ReadLock)(nil)
	_ driver.Fencer = (*WriteLock)(nil)
)

// raiseKind raises key's fence to token if owner holds the kind's hold
// in holders (kind_raise.lua names the kinds).
func (b *Backend) raiseKind(ctx context.Context, key, owner string, token uint64, holders func(names) string, kind string) (bool, error) {
	if err := checkOwner(ctx, key, owner); err != nil {
		return false, err
	}
	if token >= maxToken {
		return false, fmt.Errorf("redis: raise fence of %q: token %d is not below 2^53", key, token)
	}
	n := b.names(key)
	r, err := b.run(ctx, kindRaise, call{
		keys: []string{holders(n), n.fence},
		args: []string{owner, strconv.FormatUint(token, 10), b.cfg.graceArg, kind},
	})
	return r == 1, err
}

// RaiseFence implements driver.Fencer: if owner holds key, it raises the
// key's last token to at least token, kept while the lock lives plus the
// fence grace.
func (r *Reentrant) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	return r.b.raiseKind(ctx, key, owner, token, func(n names) string { return n.kindKey(rediskeys.Reentrant) }, "hash")
}

// RaiseFence implements driver.Fencer for a reader, as Reentrant's.
func (r *ReadLock) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	return r.rw.b.raiseKind(ctx, key, owner, token, func(n names) string { return n.kindKey(rediskeys.Readers) }, "set")
}

// RaiseFence implements driver.Fencer for the writer, as Reentrant's.
func (w *WriteLock) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	return w.rw.b.raiseKind(ctx, key, owner, token, func(n names) string { return n.kindKey(rediskeys.Writer) }, "string")
}

package redis

import (
	"context"
	"fmt"
	"strconv"
)

// maxToken is 2^53: the scripts do arithmetic on Lua numbers (doubles),
// which hold integers exactly only below it. Tokens are microseconds since
// 1970, about 2^50.6 today, so the bound is centuries away.
const maxToken = 1 << 53

// RaiseFence implements driver.Fencer: if owner holds key, it raises the
// key's stored last token to at least token, so that every token issued
// later for key is greater, and keeps that state for as long as the lock
// lives plus the fence grace. One script, one round trip.
func (b *Backend) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	if err := check(ctx, key); err != nil {
		return false, err
	}
	if token >= maxToken {
		return false, fmt.Errorf("redis: raise fence of %q: token %d is not below 2^53", key, token)
	}
	n := b.names(key)
	r, err := b.conn.eval(ctx, raiseScript, call{
		keys: []string{n.lock, n.fence},
		args: []string{owner, strconv.FormatUint(token, 10), b.cfg.graceArg},
	})
	return r == 1, err
}

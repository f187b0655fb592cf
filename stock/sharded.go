package stock

import (
	"context"
	_ "embed" // the Lua scripts
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
)

// MaxShards is the most shards a Sharded stock may have. A Take may read
// every shard in one script, and Redis runs nothing else while a script
// runs: 64 reads keep the longest Take at tens of
// microseconds. More shards than concurrent buyers would not spread them
// further anyway.
const MaxShards = 64

var (
	//go:embed take.lua
	takeLua string
	//go:embed rebalance.lua
	rebalanceLua string

	// A Lua value only holds the source and its SHA-1; Exec sends EVALSHA
	// and falls back to EVAL when the server lost its script cache.
	takeScript      = rueidis.NewLuaScript(takeLua)
	rebalanceScript = rueidis.NewLuaScript(rebalanceLua)
)

// Sharded is a stock split over shard keys. For a key K and
// N shards the units live in
//
//	{K}:0, {K}:1, ... {K}:N-1
//
// The braces make K the Redis Cluster hash tag, so every shard is in one
// hash slot — on one node of a cluster — and one script can see them all:
// that is what lets a Take fall through to the next shard and a Rebalance
// move units between shards atomically. (A key beginning with '}' or '\'
// is stored with a leading '\' so that its tag is never empty.)
//
// Take runs one short script: it starts at a shard chosen at random, so
// that concurrent orders draw from different keys, and takes the units
// from the first shard, counting on from there, that holds enough.
//
// Guarantee: no shard ever reads below zero, even for an instant, and a
// Take fails with ErrSoldOut only when all shards together hold fewer units
// than it asked for. With orders of more than one unit the units left can
// end up spread so thinly that no single shard holds a whole order (8
// shards of 1 and an order of 5); Take then gathers the order from several
// shards in the same script, in shard order from its start, and returns
// the first shard it drew from. Rebalance spreads what is left evenly
// again, so that orders are served from their start shard once more.
//
// Use the same shard count for a key everywhere: shards past N are not
// read. To change it, read Left and Set it through a Sharded with the new
// count after clearing the old keys. A Sharded is safe for concurrent use.
type Sharded struct {
	client rueidis.Client
	key    string
	keys   []string // the shard keys, index order; never modified
}

// NewSharded returns the stock kept in shards keys named after key; shards
// must be in [1, MaxShards]. The caller keeps owning client.
func NewSharded(client rueidis.Client, key string, shards int) (*Sharded, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", turnstile.ErrInvalidOption)
	}
	if err := checkKey("stock key", key); err != nil {
		return nil, err
	}
	if shards < 1 || shards > MaxShards {
		return nil, fmt.Errorf("%w: %d shards is outside [1, %d]", turnstile.ErrInvalidOption, shards, MaxShards)
	}
	tag := key
	if tag[0] == '}' || tag[0] == '\\' {
		tag = `\` + tag
	}
	keys := make([]string, shards)
	for i := range keys {
		keys[i] = "{" + tag + "}:" + strconv.Itoa(i)
	}
	return &Sharded{client: client, key: key, keys: keys}, nil
}

// Shards returns the shard count.
func (s *Sharded) Shards() int { return len(s.keys) }

// Set stores total units spread evenly over the shards, the remainder one
// each on the first shards, replacing what they held (one MSET, atomic).
func (s *Sharded) Set(ctx context.Context, total int64) error {
	if err := checkTotal(total); err != nil {
		return err
	}
	n := int64(len(s.keys))
	each, extra := total/n, total%n
	cmd := s.client.B().Mset().KeyValue()
	for i, k := range s.keys {
		v := each
		if int64(i) < extra {
			v++
		}
		cmd = cmd.KeyValue(k, strconv.FormatInt(v, 10))
	}
	if err := s.client.Do(ctx, cmd.Build()).Error(); err != nil {
		return fmt.Errorf("stock: set %q: %w", s.key, err)
	}
	return nil
}

// Take takes n units and returns the shard they came from (give them back
// there with Put). When the shards together hold fewer than n it takes
// nothing and returns -1 and ErrSoldOut.
func (s *Sharded) Take(ctx context.Context, n int64) (shard int, err error) {
	if err := checkQuantity(n); err != nil {
		return -1, err
	}
	start := rand.IntN(len(s.keys))
	args := []string{strconv.FormatInt(n, 10), strconv.Itoa(start)}
	idx, err := takeScript.Exec(ctx, s.client, s.keys, args).AsInt64()
	if err != nil {
		return -1, fmt.Errorf("stock: take %d from %q: %w", n, s.key, err)
	}
	if idx < 0 {
		return -1, fmt.Errorf("%w: %q has fewer than %d units", ErrSoldOut, s.key, n)
	}
	return int(idx), nil
}

// Put gives n units back to shard (a cancelled order).
func (s *Sharded) Put(ctx context.Context, shard int, n int64) error {
	if shard < 0 || shard >= len(s.keys) {
		return fmt.Errorf("%w: shard %d is outside [0, %d)", turnstile.ErrInvalidOption, shard, len(s.keys))
	}
	if err := checkQuantity(n); err != nil {
		return err
	}
	cmd := s.client.B().Incrby().Key(s.keys[shard]).Increment(n).Build()
	if err := s.client.Do(ctx, cmd).Error(); err != nil {
		return fmt.Errorf("stock: put %d into %q shard %d: %w", n, s.key, shard, err)
	}
	return nil
}

// Left returns how many units the shards hold together, read in one MGET
// (a consistent snapshot).
func (s *Sharded) Left(ctx context.Context) (int64, error) {
	levels, err := s.Levels(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, v := range levels {
		total += v
	}
	return total, nil
}

// Levels returns what each shard holds, in shard order, read in one MGET
// (a consistent snapshot). A missing shard key holds zero.
func (s *Sharded) Levels(ctx context.Context) ([]int64, error) {
	msgs, err := s.client.Do(ctx, s.client.B().Mget().Key(s.keys...).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("stock: read %q: %w", s.key, err)
	}
	out := make([]int64, len(msgs))
	for i := range msgs {
		if msgs[i].IsNil() {
			continue
		}
		v, err := msgs[i].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("stock: read %q shard %d: %w", s.key, i, err)
		}
		out[i] = v
	}
	return out, nil
}

// Rebalance spreads the units left evenly over the shards again, the
// remainder one each on the first shards, in one script: the total is
// preserved and no order sees a half-moved stock.
func (s *Sharded) Rebalance(ctx context.Context) error {
	if err := rebalanceScript.Exec(ctx, s.client, s.keys, nil).Error(); err != nil {
		return fmt.Errorf("stock: rebalance %q: %w", s.key, err)
	}
	return nil
}

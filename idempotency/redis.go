package idempotency

import (
	"context"
	_ "embed" // the Lua scripts
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Each step is one short script, so one round trip and atomic on the
// server; rueidis runs them with EVALSHA and falls back to EVAL.
var (
	//go:embed claim.lua
	claimLua string
	//go:embed renew.lua
	renewLua string
	//go:embed store.lua
	storeLua string
	//go:embed release.lua
	releaseLua string
)

// RedisKeyPrefix begins the Redis key of every request key: request key K
// is stored at RedisKeyPrefix + K.
const RedisKeyPrefix = "turnstile:idempotency:"

// Values of a request's Redis key: a running claim, or a stored result.
const (
	claimTag  = "c"
	resultTag = "d"
)

// Redis is a Store on Redis (a single server or a Redis Cluster). A request
// key is one Redis key holding either the running call's claim, set with
// SET NX PX for the claim TTL and extended while fn runs, or the result,
// which expires after the retention; Redis drops both when they expire.
// Renewing, storing and dropping a claim are owner-checked scripts, so a
// call whose claim was lost never overwrites another's.
//
// A result is as durable as the Redis server makes it: a restart without
// persistence, or a failover before the write reached the replica, forgets
// it, and the next duplicate runs fn again. Use Postgres where a replay
// must survive that. Duplicates waiting WithWait poll the key with
// backoff (2 ms doubling to 100 ms).
type Redis struct {
	r       runner
	client  rueidis.Client
	scripts struct{ claim, renew, store, release *rueidis.Lua }
}

var _ Store = (*Redis)(nil)

// NewRedis returns a Store on the Redis server or cluster client talks to.
// The caller keeps ownership of client and closes it after the last Do.
func NewRedis(client rueidis.Client, opts ...Option) (*Redis, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: NewRedis needs a rueidis.Client", ErrNilClient)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("turnstile/idempotency: NewRedis: %w", err)
	}
	s := &Redis{client: client}
	s.scripts.claim = rueidis.NewLuaScript(claimLua)
	s.scripts.renew = rueidis.NewLuaScript(renewLua)
	s.scripts.store = rueidis.NewLuaScript(storeLua)
	s.scripts.release = rueidis.NewLuaScript(releaseLua)
	s.r = runner{cfg: cfg, b: (*redisBackend)(s)}
	return s, nil
}

// Do implements Store.
func (s *Redis) Do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) ([]byte, bool, error) {
	return s.r.Do(ctx, key, fn)
}

func (s *Redis) runner() *runner { return &s.r }

// redisBackend is Redis's backend.
type redisBackend Redis

func (b *redisBackend) name() string { return "redis" }

// ms is d in whole milliseconds, at least 1, as PX and PEXPIRE take it.
func ms(d time.Duration) string {
	return strconv.FormatInt(max(1, d.Milliseconds()), 10)
}

func (b *redisBackend) claim(ctx context.Context, key, owner string) (outcome, error) {
	v, err := b.scripts.claim.Exec(ctx, b.client, []string{RedisKeyPrefix + key}, []string{claimTag + owner, ms(b.r.cfg.claimTTL)}).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return outcome{state: claimed}, nil
	case err != nil:
		return outcome{}, err
	}
	o, err := redisOutcome(v)
	if err != nil {
		return outcome{}, fmt.Errorf("redis key %q: %w", RedisKeyPrefix+key, err)
	}
	return o, nil
}

func (b *redisBackend) renew(ctx context.Context, key, owner string) (bool, error) {
	return b.ok(b.scripts.renew.Exec(ctx, b.client, []string{RedisKeyPrefix + key}, []string{claimTag + owner, ms(b.r.cfg.claimTTL)}))
}

func (b *redisBackend) complete(ctx context.Context, key, owner string, result []byte) (bool, error) {
	return b.ok(b.scripts.store.Exec(ctx, b.client, []string{RedisKeyPrefix + key}, []string{claimTag + owner, resultTag + string(result), ms(b.r.cfg.retention)}))
}

func (b *redisBackend) release(ctx context.Context, key, owner string) (bool, error) {
	return b.ok(b.scripts.release.Exec(ctx, b.client, []string{RedisKeyPrefix + key}, []string{claimTag + owner}))
}

func (b *redisBackend) ok(r rueidis.RedisResult) (bool, error) {
	n, err := r.AsInt64()
	return n == 1, err
}

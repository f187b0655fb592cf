package fence

import (
	"context"
	_ "embed" // the Lua script
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/clusterslot"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

//go:embed redis_write.lua
var writeLua string

// writeScript holds only the source and its SHA-1: rueidis runs it with
// EVALSHA and falls back to EVAL when the server lost its script cache.
var writeScript = rueidis.NewLuaScript(writeLua)

// Redis is a guard for data in Redis: each write is one script that checks
// the token against the resource's guard key and applies the write only if
// the token is fresh, atomically. It is safe for concurrent use.
type Redis struct {
	c       rueidis.Client
	cfg     config
	cluster bool
	same    string // ARGV[2]
}

// NewRedis returns a Redis guard over client, which the caller keeps and
// closes. Options: AllowSameToken, WithKeysOf.
func NewRedis(client rueidis.Client, opts ...Option) (*Redis, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", turnstile.ErrInvalidOption)
	}
	if v := reflect.ValueOf(client); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("%w: nil %T", turnstile.ErrInvalidOption, client)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := cfg.postgresOnly("Redis"); err != nil {
		return nil, err
	}
	r := &Redis{c: client, cfg: cfg, cluster: client.Mode() == rueidis.ClientModeCluster, same: "0"}
	if cfg.allowSame {
		r.same = "1"
	}
	return r, nil
}

// GuardKey is the Redis key that holds the last token accepted for
// resource by a guard without WithKeysOf: "{resource}:guard" (a resource
// beginning with '}' or '\' gets a '\' in front, as the redis backend
// escapes lock keys). It never expires: a token must outlive every lease
// of the resource for as long as the data it guards lives.
func GuardKey(resource string) string { return rediskeys.Key("", resource, rediskeys.Guard) }

// DataKey returns "{resource}:name", a key in resource's Redis Cluster
// hash slot, which every data key written through the guard must share
// on a cluster. Names that a lock on resource uses are taken, and a
// write to the key they give is refused (see the package doc, Redis).
func DataKey(resource, name string) string { return rediskeys.Tag(resource) + ":" + name }

// GuardKey is the Redis key of resource's guard: GuardKey(resource),
// under the prefix of WithKeysOf.
func (r *Redis) GuardKey(resource string) string {
	return rediskeys.Key(r.cfg.prefix, resource, rediskeys.Guard)
}

// DataKey is DataKey(resource, name) under the prefix of WithKeysOf.
func (r *Redis) DataKey(resource, name string) string {
	return r.cfg.prefix + DataKey(resource, name)
}

// Set sets key to value if token is fresh for resource: greater than the
// last token accepted for it (or equal, with AllowSameToken). Otherwise it
// returns a *StaleTokenError (errors.Is(err, ErrStaleToken)) and
// writes nothing. On Redis Cluster key must hash to resource's slot (use
// DataKey), or Set returns ErrCrossSlot.
func (r *Redis) Set(ctx context.Context, resource string, token uint64, key, value string) error {
	_, err := r.write(ctx, resource, token, key, "set", value)
	return err
}

// IncrBy adds delta to the integer at key (a missing key counts as 0) if
// token is fresh for resource, and returns the new value. A stale token
// gives a *StaleTokenError and changes nothing; so does a key that holds
// no integer (then the error is Redis's). Keys as for Set.
func (r *Redis) IncrBy(ctx context.Context, resource string, token uint64, key string, delta int64) (int64, error) {
	return r.write(ctx, resource, token, key, "incrby", strconv.FormatInt(delta, 10))
}

func (r *Redis) write(ctx context.Context, resource string, token uint64, key, op, arg string) (int64, error) {
	if err := r.checkArgs(ctx, resource); err != nil {
		return 0, err
	}
	if err := checkToken(token); err != nil {
		return 0, err
	}
	guard := r.GuardKey(resource)
	if err := r.checkKey(resource, guard, key); err != nil {
		return 0, err
	}
	t := strconv.FormatUint(token, 10)
	arr, err := writeScript.Exec(ctx, r.c, []string{guard, key}, []string{t, r.same, op, arg}).ToArray()
	if err != nil {
		return 0, r.redisError(op, resource, key, err)
	}
	if len(arr) != 2 {
		return 0, fmt.Errorf("turnstile/fence: %s %q: unexpected script reply of %d elements", op, resource, len(arr))
	}
	applied, err := arr[0].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("turnstile/fence: %s %q: unexpected script reply: %w", op, resource, err)
	}
	if applied == 1 {
		n, err := arr[1].AsInt64()
		if err != nil {
			return 0, fmt.Errorf("turnstile/fence: %s %q: unexpected script reply: %w", op, resource, err)
		}
		return n, nil
	}
	s, err := arr[1].ToString()
	if err != nil {
		return 0, fmt.Errorf("turnstile/fence: %s %q: unexpected script reply: %w", op, resource, err)
	}
	last, err := parseToken(guard, s)
	if err != nil {
		return 0, fmt.Errorf("turnstile/fence: %s %q: %w", op, resource, err)
	}
	return 0, &StaleTokenError{Resource: resource, Token: token, Last: last}
}

// Last returns the last token accepted for resource, 0 if none.
func (r *Redis) Last(ctx context.Context, resource string) (uint64, error) {
	if err := r.checkArgs(ctx, resource); err != nil {
		return 0, err
	}
	guard := r.GuardKey(resource)
	s, err := r.c.Do(ctx, r.c.B().Get().Key(guard).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("turnstile/fence: read last token of %q: %w", resource, err)
	}
	last, err := parseToken(guard, s)
	if err != nil {
		return 0, fmt.Errorf("turnstile/fence: read last token of %q: %w", resource, err)
	}
	return last, nil
}

// parseToken reads a guard key's value as the script does: a decimal
// uint64 without leading zeros.
func parseToken(guard, s string) (uint64, error) {
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil || t == 0 || strconv.FormatUint(t, 10) != s {
		return 0, fmt.Errorf("guard key %s holds no token: %q", guard, s)
	}
	return t, nil
}

func (r *Redis) checkArgs(ctx context.Context, resource string) error {
	if r == nil || r.c == nil {
		return fmt.Errorf("%w: nil *fence.Redis", turnstile.ErrInvalidOption)
	}
	if err := checkContext(ctx); err != nil {
		return err
	}
	return checkResource(resource)
}

// checkKey refuses a data key that a lock or a guard keeps — of any
// resource, under any prefix — and, on a cluster, one outside the
// resource's slot (rueidis would refuse to build such a command by
// panicking).
func (r *Redis) checkKey(resource, guard, key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty data key", turnstile.ErrInvalidKey)
	}
	if rediskeys.Taken(key) {
		return fmt.Errorf("%w: data key %q is named as a key of a lock or a guard (see fence.DataKey)", turnstile.ErrInvalidKey, key)
	}
	if r.cluster && clusterslot.Of(key) != clusterslot.Of(guard) {
		return fmt.Errorf("%w: key %q is in slot %d, resource %q in slot %d (use fence.DataKey(resource, name))",
			ErrCrossSlot, key, clusterslot.Of(key), resource, clusterslot.Of(guard))
	}
	return nil
}

func (r *Redis) redisError(op, resource, key string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "CROSSSLOT") {
		return fmt.Errorf("%w: %s %q: key %q (use fence.DataKey(resource, name)): %w", ErrCrossSlot, op, resource, key, err)
	}
	return fmt.Errorf("turnstile/fence: %s %q on key %q: %w", op, resource, key, err)
}

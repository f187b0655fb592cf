package admission

import (
	"context"
	_ "embed" // the GCRA script
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
)

//go:embed gcra.lua
var gcraLua string

// Redis limits each key across every process that uses the same Redis:
// the limit is kept on the server, one key per limited resource, and each
// Admit is one short script (one round trip, atomic on the server).
//
// Before asking Redis, Admit asks a local pre-filter (see the package
// documentation), so that a process never sends Redis more requests for a
// key than the limit could admit.
//
// A Redis is safe for concurrent use. It does not own its client: close
// the client when done.
type Redis struct {
	client rueidis.Client
	script *rueidis.Lua
	prefix string
	args   []string // emission interval, window
	local  *Local   // nil without the pre-filter
}

// NewRedis returns an admission with limit for every key, kept in the
// Redis that client talks to (one server or a Redis Cluster). Options:
// WithPrefix, WithMaxKeys, WithoutPreFilter.
func NewRedis(client rueidis.Client, limit Limit, opts ...Option) (*Redis, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", turnstile.ErrInvalidOption)
	}
	if err := limit.check(); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	interval := limit.interval()
	r := &Redis{
		client: client,
		script: rueidis.NewLuaScript(gcraLua),
		prefix: cfg.prefix,
		args: []string{
			strconv.FormatFloat(interval, 'g', -1, 64),
			strconv.FormatFloat(interval*float64(limit.Burst), 'g', -1, 64),
		},
	}
	if cfg.preFilter {
		r.local = newLocal(limit, cfg.maxKeys)
	}
	return r, nil
}

// Admit admits key if its shared limit allows one more request now. It
// returns false and how long until a request may be admitted when the
// limit (or the pre-filter) says no, and an error when Redis could not be
// asked; then it is unknown whether the request counted against the
// limit. It implements turnstile.Admission.
func (r *Redis) Admit(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error) {
	n, retryAfter, err := r.AdmitN(ctx, key, 1)
	return n == 1, retryAfter, err
}

// AdmitN admits up to n requests of key at once (n ≥ 1): as many as the
// shared limit (and the pre-filter) allow now, 0 to n. With 0 it returns
// how long until one may be admitted. A line of waiting callers asks once
// for its front this way (it implements turnstile.BatchAdmission).
func (r *Redis) AdmitN(ctx context.Context, key string, n int) (admitted int, retryAfter time.Duration, err error) {
	if err := checkCall(ctx, key); err != nil {
		return 0, 0, err
	}
	if n < 1 || n > MaxBatch {
		return 0, 0, fmt.Errorf("%w: admission batch %d is outside [1, %d]", turnstile.ErrInvalidOption, n, MaxBatch)
	}
	if r.local != nil {
		k, wait := r.local.allowN(key, time.Now(), n)
		if k == 0 {
			return 0, wait, nil
		}
		n = k
	}
	name := r.Key(key)
	args := r.args
	if n > 1 {
		args = append(append(make([]string, 0, 3), r.args...), strconv.Itoa(n))
	}
	res, err := r.script.Exec(ctx, r.client, []string{name}, args).AsIntSlice()
	if err != nil {
		return 0, 0, fmt.Errorf("admission: %s: %w", name, err)
	}
	if len(res) != 2 || res[0] < 0 || res[0] > int64(n) {
		return 0, 0, fmt.Errorf("admission: %s: script returned %v, want {0..%d, µs}", name, res, n)
	}
	if res[0] > 0 {
		return int(res[0]), 0, nil
	}
	return 0, time.Duration(res[1]) * time.Microsecond, nil
}

// Key returns the Redis key that holds key's limit: prefix + "{" + key +
// "}:admission". It shares a hash slot with the redis backend's keys of
// the lock on key (prefix + "{key}", "{key}:fence", "{key}:released"), and
// it is escaped the same way: a key that begins with '}' or '\' gets a
// leading '\'.
func (r *Redis) Key(key string) string {
	if key != "" && (key[0] == '}' || key[0] == '\\') {
		key = `\` + key
	}
	return r.prefix + "{" + key + "}:admission"
}

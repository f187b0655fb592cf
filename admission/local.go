package admission

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/turnstilelock/turnstile"
)

// Local limits each key within this process only: a token bucket
// (golang.org/x/time/rate) per key. N processes with the same Local limit
// admit up to N times the limit between them; use Redis for a limit shared
// by all of them.
//
// Memory is bounded: Local tracks at most WithMaxKeys keys (default
// DefaultMaxKeys) and forgets the least recently asked one past that. A
// forgotten key starts again with a full burst, which loses nothing if it
// was idle for Burst/Rate or longer — its bucket was full anyway — and
// otherwise lets that key through up to Burst more times than the limit.
// Keep the bound above the number of keys asked for within any Burst/Rate.
//
// A Local is safe for concurrent use.
type Local struct {
	limit Limit
	max   int

	mu    sync.Mutex
	keys  map[string]*list.Element // of *bucket
	order list.List                // most recently asked first
}

// bucket is the limiter of one key.
type bucket struct {
	key string
	lim *rate.Limiter
}

// NewLocal returns a per-process admission with limit for every key.
// Options: WithMaxKeys.
func NewLocal(limit Limit, opts ...Option) (*Local, error) {
	if err := limit.check(); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.redisOnly != "" {
		return nil, fmt.Errorf("%w: %s applies to a Redis admission only", turnstile.ErrInvalidOption, cfg.redisOnly)
	}
	return newLocal(limit, cfg.maxKeys), nil
}

func newLocal(limit Limit, maxKeys int) *Local {
	return &Local{limit: limit, max: maxKeys, keys: make(map[string]*list.Element)}
}

// Admit admits key if its bucket holds a token, and takes the token.
// Otherwise it returns false and how long until the bucket holds one. It
// implements turnstile.Admission.
func (l *Local) Admit(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error) {
	if err := checkCall(ctx, key); err != nil {
		return false, 0, err
	}
	ok, retryAfter = l.allow(key, time.Now())
	return ok, retryAfter, nil
}

// Len returns how many keys Local tracks now, at most the WithMaxKeys
// bound.
func (l *Local) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// AdmitN admits up to n requests of key at once (n ≥ 1), as many as the
// limit allows now; with 0 it says how long until one may be admitted. It
// implements turnstile.BatchAdmission.
func (l *Local) AdmitN(ctx context.Context, key string, n int) (admitted int, retryAfter time.Duration, err error) {
	if err := checkCall(ctx, key); err != nil {
		return 0, 0, err
	}
	if n < 1 || n > MaxBatch {
		return 0, 0, fmt.Errorf("%w: admission batch %d is outside [1, %d]", turnstile.ErrInvalidOption, n, MaxBatch)
	}
	k, wait := l.allowN(key, time.Now(), n)
	return k, wait, nil
}

// allowN takes up to n tokens of key's bucket at now — as many as are
// there — or says how long until one is.
func (l *Local) allowN(key string, now time.Time, n int) (int, time.Duration) {
	lim := l.bucket(key)
	k := min(n, int(lim.TokensAt(now)))
	if k >= 1 && lim.AllowN(now, k) {
		return k, 0
	}
	if lim.AllowN(now, 1) {
		return 1, 0
	}
	return 0, l.wait(lim, now)
}

// allow takes a token of key's bucket at now, or says how long until one
// is there.
func (l *Local) allow(key string, now time.Time) (bool, time.Duration) {
	lim := l.bucket(key)
	if lim.AllowN(now, 1) {
		return true, 0
	}
	return false, l.wait(lim, now)
}

// wait is how long until lim, which just refused a token at now, holds
// one: never 0, since a refusal that says "now" would be asked again at
// once. (A concurrent caller of a later instant may have refilled the
// bucket since the refusal; then the token is there already.)
func (l *Local) wait(lim *rate.Limiter, now time.Time) time.Duration {
	missing := 1 - lim.TokensAt(now)
	return max(time.Duration(missing/l.limit.Rate*float64(time.Second)), time.Microsecond)
}

// bucket returns key's limiter, making it the most recently used, and
// forgets the least recently used key when the bound is reached.
func (l *Local) bucket(key string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.keys[key]; ok {
		l.order.MoveToFront(e)
		return e.Value.(*bucket).lim
	}
	if len(l.keys) >= l.max {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.keys, oldest.Value.(*bucket).key)
	}
	b := &bucket{key: key, lim: rate.NewLimiter(rate.Limit(l.limit.Rate), l.limit.Burst)}
	l.keys[key] = l.order.PushFront(b)
	return b.lim
}

// checkCall refuses the arguments of an Admit that cannot be served.
func checkCall(ctx context.Context, key string) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	if key == "" {
		return fmt.Errorf("%w: empty key", turnstile.ErrInvalidKey)
	}
	if len(key) > turnstile.MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", turnstile.ErrInvalidKey, len(key), turnstile.MaxKeyLen)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("admission: %q: %w", key, err)
	}
	return nil
}

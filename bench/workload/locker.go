package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"

	_ "github.com/turnstilelock/turnstile/redis"   // registers redis://
	_ "github.com/turnstilelock/turnstile/redlock" // registers redlock://
)

// ErrUsage reports a workload, cell or library setting that cannot run.
var ErrUsage = errors.New("workload: invalid setting")

// A Locker takes locks for a cell's workers. It is safe for concurrent
// use.
type Locker interface {
	// Acquire takes the lock on key, waiting while another owner holds
	// it, until it is taken or ctx is done.
	Acquire(ctx context.Context, key string) (Held, error)
	// Close releases the Locker's connections.
	Close() error
}

// Held is a lock taken by Acquire.
type Held interface {
	// Release frees the lock.
	Release(ctx context.Context) error
}

// Library opens Lockers of one lock library.
type Library struct {
	// Name identifies the library in results ("turnstile", "redsync", ...).
	Name string
	// Open connects a Locker to the Redis servers at addrs (host:port):
	// one for single-node workloads, several for Redlock. concurrency is
	// how many workers will share it, for libraries whose connection
	// pool must be sized.
	Open func(ctx context.Context, addrs []string, concurrency int) (Locker, error)
	// MultiNode reports whether the library can run Redlock workloads
	// (Nodes > 1).
	MultiNode bool
}

// TTL is the lock TTL every library is given where it takes one, so that
// no library renews and another does not within a cell.
const TTL = 10 * time.Second

// Backoff is the wait between attempts on a held key that the libraries
// that retry by polling are given: full jitter over an exponential
// ceiling from 1 ms to 8 ms, without a retry limit (the cell's context
// ends the wait).
var Backoff = turnstile.Exponential{Base: time.Millisecond, Cap: 8 * time.Millisecond, MaxRetries: -1}

// Turnstile is turnstile over a redis-server (one address) or a Redlock
// of independent servers (several addresses, restart quarantine off:
// the benchmark's servers have just been started and hold no lock
// anyone could lose), with TTL and Backoff.
func Turnstile() Library { return turnstileLibrary("turnstile") }

// TurnstileDefaults is Turnstile pacing its attempts between release
// notices with turnstile's default Backoff (10 ms … 1 s, full jitter)
// instead of the shared Backoff, without a retry limit: how turnstile
// waits when nobody tunes it.
func TurnstileDefaults() Library {
	return turnstileLibrary("turnstile-defaults", turnstile.WithBackoff(turnstile.Exponential{
		Base: turnstile.DefaultBackoffBase, Cap: turnstile.DefaultBackoffCap, MaxRetries: -1}))
}

func turnstileLibrary(name string, opts ...turnstile.Option) Library {
	return Library{
		Name:      name,
		MultiNode: true,
		Open: func(ctx context.Context, addrs []string, _ int) (Locker, error) {
			switch len(addrs) {
			case 0:
				return nil, fmt.Errorf("%w: no redis address", ErrUsage)
			case 1:
				return OpenTurnstile(ctx, "redis://"+addrs[0], opts...)
			}
			return OpenTurnstile(ctx, "redlock://"+strings.Join(addrs, ",")+"?quarantine=0", opts...)
		},
	}
}

// OpenTurnstile opens a turnstile client on url (any scheme registered
// with turnstile.Open; this package registers redis:// and redlock://)
// with TTL, Backoff and opts, as a Locker.
func OpenTurnstile(ctx context.Context, url string, opts ...turnstile.Option) (Locker, error) {
	opts = append([]turnstile.Option{turnstile.WithTTL(TTL), turnstile.WithBackoff(Backoff)}, opts...)
	c, err := turnstile.Open(ctx, url, opts...)
	if err != nil {
		return nil, fmt.Errorf("workload: open turnstile: %w", err)
	}
	return turnstileLocker{c}, nil
}

type turnstileLocker struct{ c *turnstile.Client }

func (t turnstileLocker) Acquire(ctx context.Context, key string) (Held, error) {
	l, err := t.c.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (t turnstileLocker) Close() error { return t.c.Close() }

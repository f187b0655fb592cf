package redlock

import (
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/redis"
)

// Defaults.
const (
	// DefaultNodeTimeout bounds each node's answer to one call. A healthy
	// node on the same network answers in well under a millisecond (the
	// acquire latency p99 turnstile aims at is 5 ms), so 50 ms is ten
	// times the latency budget: long enough that a busy node is not taken for a dead one,
	// short enough that a dead or partitioned node costs an acquisition at
	// most 50 ms, 0.17 % of the default 30 s TTL. Each call also caps it
	// at a tenth of the lease TTL, so that contacting the nodes and
	// writing the token back (two rounds) can never use more than a fifth
	// of the lease's validity.
	DefaultNodeTimeout = 50 * time.Millisecond

	// DefaultRestartQuarantine is how long a Redis node that Dial or Open
	// connects to refuses locks after its process started: the default
	// lease TTL (30 s) plus a margin of 5 s. It must be at least the
	// largest TTL any client of the nodes uses, and the Backend refuses
	// longer TTLs. See the package documentation.
	DefaultRestartQuarantine = 35 * time.Second
)

// Drift allowance, as in docs/guarantees.md: a lease is trusted for TTL − elapsed −
// (TTL × driftFactor + driftFixed), with the fixed part at most a quarter
// of the TTL, as the Client does.
const (
	driftFactor = turnstile.DefaultDriftFactor
	driftFixed  = turnstile.DefaultDriftMinimum
)

type config struct {
	nodeTimeout time.Duration
	fencing     bool
	waitAll     bool
	closeNodes  bool
	onQuorum    func(op string, reached bool) // nil: not observed
	// Used by Dial only, for the nodes it creates.
	quarantine time.Duration
	nodeOpts   []redis.Option
}

func defaultConfig() config {
	return config{nodeTimeout: DefaultNodeTimeout, fencing: true, quarantine: DefaultRestartQuarantine}
}

// An Option changes a setting of a Backend.
type Option func(*config) error

// WithNodeTimeout sets how long one call waits for each node's answer
// before counting the node as failed. Default 50 ms (DefaultNodeTimeout).
// Each call uses at most a tenth of its lease TTL. It must lie in
// [100 µs, 10 s].
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 100*time.Microsecond || d > 10*time.Second {
			return fmt.Errorf("%w: redlock node timeout %v is outside [100µs, 10s]", turnstile.ErrInvalidOption, d)
		}
		c.nodeTimeout = d
		return nil
	}
}

// WithoutFencing skips writing the lease's token back to a quorum of nodes
// before Acquire returns, which saves one round trip per acquisition, and
// accepts nodes that cannot raise tokens (driver.Fencer). Tokens are then
// only the largest token of the granting quorum: they still increase while
// every acquisition is granted by every node, but can go backwards after a
// node failure or when quorums differ, so storage that checks them may
// wrongly accept a stale holder. Default: fencing on. Use it for
// deployments that do not pass tokens to storage.
func WithoutFencing() Option {
	return func(c *config) error {
		c.fencing = false
		return nil
	}
}

// WithWaitAll makes Acquire, Extend and RaiseFence wait for every node's
// answer (up to the node timeout) instead of returning as soon as the
// outcome is decided; errors then report every node. Default: return
// early; the remaining answers are collected, and cleaned up after, in
// the background. Release always waits for every node.
func WithWaitAll() Option {
	return func(c *config) error {
		c.waitAll = true
		return nil
	}
}

// WithCloseNodes makes Close close every node that implements io.Closer.
// Default: New leaves them to the caller; Dial and turnstile.Open own the
// nodes they create and always close them.
func WithCloseNodes() Option {
	return func(c *config) error {
		c.closeNodes = true
		return nil
	}
}

// WithRestartQuarantine sets the restart quarantine of the Redis nodes
// that Dial (and turnstile.Open) creates: each refuses locks for d after
// its process started (redis.WithRestartQuarantine). Default 35 s
// (DefaultRestartQuarantine); 0 turns it off. It must be at least the
// largest TTL any client of these nodes uses, and at most 24 h. New
// ignores it: configure the nodes you pass yourself.
func WithRestartQuarantine(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || d > 24*time.Hour {
			return fmt.Errorf("%w: redlock restart quarantine %v is outside [0, 24h]", turnstile.ErrInvalidOption, d)
		}
		c.quarantine = d
		return nil
	}
}

// WithNodeOptions passes options to every Redis node that Dial (and
// turnstile.Open) creates, for example redis.WithPrefix. New ignores it.
func WithNodeOptions(opts ...redis.Option) Option {
	return func(c *config) error {
		c.nodeOpts = append(c.nodeOpts, opts...)
		return nil
	}
}

// WithQuorumObserver calls f once for every decided acquire, extend and
// release round (op "acquire", "extend" or "release"; ExtendMany reports
// one extend round per lease). reached is true when the round got a
// definite answer — a quorum said yes, or refused (see Backend.Acquire) —
// and false when it failed for lack of answering nodes: the call
// returned, or Acquire would have returned, a *QuorumError because failed
// or timed-out nodes kept the quorum out of reach. Rounds that the
// caller's context ended are not reported. f runs synchronously on the
// calling goroutine and from many goroutines at once: it must be safe for
// concurrent use and return quickly (metrics.Collector.ObserveQuorum
// does). Default: none.
func WithQuorumObserver(f func(op string, reached bool)) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil redlock quorum observer", turnstile.ErrInvalidOption)
		}
		c.onQuorum = f
		return nil
	}
}

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil redlock option", turnstile.ErrInvalidOption)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// timeout is the per-node timeout of a call for a lease of ttl.
func (c *config) timeout(ttl time.Duration) time.Duration {
	return max(min(c.nodeTimeout, ttl/10), 100*time.Microsecond)
}

// drift is the part of ttl that is not trusted: TTL × 1 % + min(2 ms,
// TTL/4) with the default factors.
func drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*driftFactor) + min(driftFixed, ttl/4)
}

// validity is what is left of a lease of ttl after elapsed:
// TTL 10 s, 50 ms elapsed → 9,848 ms.
func validity(ttl, elapsed time.Duration) time.Duration {
	return ttl - elapsed - drift(ttl)
}

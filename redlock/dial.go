package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/redis"
)

// Dial connects to independent Redis servers, one Redlock node per
// address, and returns a Backend that owns the connections (Close closes
// them). opt is the template of every node's rueidis client: its
// InitAddress is replaced by the node's address, and each client talks to
// one server only (ForceSingleClient).
//
// Every node refuses locks for the restart quarantine after its process
// started (WithRestartQuarantine, default 35 s), so a Redlock over servers
// that have just been started grants nothing until then.
//
// Dial fails if fewer than a quorum of the servers can be reached, so that
// a mistyped address is reported at once; the others are connected to
// again on every use, and join as soon as they answer.
func Dial(ctx context.Context, addrs []string, opt rueidis.ClientOption, opts ...Option) (*Backend, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: redlock needs at least one address", turnstile.ErrInvalidOption)
	}
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if a == "" {
			return nil, fmt.Errorf("%w: empty redlock node address", turnstile.ErrInvalidOption)
		}
		if seen[a] {
			return nil, fmt.Errorf("%w: redlock node %s given twice; a quorum needs independent servers", turnstile.ErrInvalidOption, a)
		}
		seen[a] = true
	}
	nodeOpts := append(cfg.nodeOpts[:len(cfg.nodeOpts):len(cfg.nodeOpts)], redis.WithRestartQuarantine(cfg.quarantine))
	if err := redis.CheckOptions(nodeOpts...); err != nil {
		return nil, err // before dialling: bad options cost no connection
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		if opt.Dialer.Timeout == 0 {
			opt.Dialer.Timeout = rueidis.DefaultDialTimeout
		}
		opt.Dialer.Timeout = max(min(opt.Dialer.Timeout, time.Until(dl)), time.Millisecond)
	}

	clients := make([]rueidis.Client, len(addrs))
	dialErrs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		o := opt
		o.InitAddress = []string{a}
		o.ForceSingleClient = true
		o.DisableCache = true // lock scripts never read through a client-side cache
		wg.Go(func() { clients[i], dialErrs[i] = rueidis.NewClient(o) })
	}
	wg.Wait()

	closeAll := func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}
	reached := 0
	var errs []error
	for i, err := range dialErrs {
		if err == nil {
			reached++
			continue
		}
		errs = append(errs, fmt.Errorf("node %d (%s): %w", i+1, addrs[i], err))
		if clients[i] == nil {
			closeAll()
			return nil, fmt.Errorf("redlock: connect: %w", errors.Join(errs...))
		}
	}
	if quorum := len(addrs)/2 + 1; reached < quorum {
		closeAll()
		return nil, fmt.Errorf("redlock: connect: %d of %d servers reached, a quorum needs %d: %w: %w", reached, len(addrs), quorum, ErrNoQuorum, errors.Join(errs...))
	}

	nodes := make([]driver.Backend, len(addrs))
	for i, c := range clients {
		n, err := redis.New(c, nodeOpts...)
		if err != nil {
			closeAll()
			return nil, err
		}
		nodes[i] = n
	}
	cfg.closeNodes = true
	b, err := newBackend(nodes, cfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	for _, c := range clients {
		b.extra = append(b.extra, closer{c})
	}
	return b, nil
}

// closer adapts a rueidis client, whose Close returns nothing.
type closer struct{ c rueidis.Client }

func (c closer) Close() error {
	c.c.Close()
	return nil
}

var _ io.Closer = closer{}

package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
)

// Released implements driver.Notifier. It subscribes on every node that
// can tell releases, all at once, and the returned channel receives a
// value when any of them tells one: a release goes to every node, so the
// first notice is enough, and one subscribed node is enough to be told.
// It fails only if no node subscribed within the node timeout. Notices
// may be lost, as on any node; waiters keep their fallback timer.
func (b *Backend) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := b.check(ctx, 0); err != nil {
		return nil, nil, err
	}
	type sub struct {
		node int
		ch   <-chan struct{}
		stop func()
		err  error
	}
	subs := make(chan sub, len(b.nodes))
	asked := 0
	for i := range b.nodes {
		n := &b.nodes[i]
		if n.notify == nil {
			continue
		}
		asked++
		if !b.spawn(func() {
			ch, stop, err := n.notify.Released(ctx, key)
			subs <- sub{i, ch, stop, err}
		}) {
			subs <- sub{node: i, err: errClosed}
		}
	}
	if asked == 0 {
		return nil, nil, fmt.Errorf("%w: no redlock node can tell releases (driver.Notifier)", turnstile.ErrInvalidOption)
	}

	out := make(chan struct{}, 1)
	done := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(done) }) }
	forward := func(s sub) {
		if !b.spawn(func() {
			defer s.stop()
			for {
				select {
				case _, open := <-s.ch:
					select {
					case out <- struct{}{}:
					default:
					}
					if !open {
						return
					}
				case <-done:
					return
				case <-ctx.Done():
					return
				case <-b.done:
					return
				}
			}
		}) {
			s.stop()
		}
	}

	timer := time.NewTimer(b.cfg.nodeTimeout)
	defer timer.Stop()
	var errs []error
	got, read := 0, 0
wait:
	for ; read < asked; read++ {
		select {
		case s := <-subs:
			if s.err != nil {
				errs = append(errs, &NodeError{Node: b.nodes[s.node].name, Err: s.err})
				continue
			}
			got++
			forward(s)
		case <-timer.C:
			break wait
		}
	}
	if left := asked - read; left > 0 {
		// Subscriptions still on their way: keep those that arrive, unless
		// the caller stopped meanwhile.
		if !b.spawn(func() {
			for range left {
				if s := <-subs; s.err == nil {
					forward(s)
				}
			}
		}) {
			stop()
		}
	}
	if got == 0 {
		stop()
		if read < asked {
			errs = append(errs, fmt.Errorf("%w (%v)", ErrNodeTimeout, b.cfg.nodeTimeout))
		}
		return nil, nil, fmt.Errorf("redlock: subscribe to releases of %q: no node subscribed: %w", key, errors.Join(errs...))
	}
	return out, stop, nil
}

package redis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var _ driver.Notifier = (*Backend)(nil)

// watchers shares one subscription per release channel between every
// waiter of every Backend over one client, so that a thousand waiters on
// one key cost one SSUBSCRIBE, and one waiter (or one Backend) giving up
// does not unsubscribe the others: the server keeps one subscription per
// connection and channel, and ends it for all on the first unsubscribe.
type watchers struct {
	conn     conn // any of the Backends' conns: they share the client
	id       any  // the client, the key in the registry
	refs     int  // Backends using it; guarded by registry.mu
	mu       sync.Mutex
	byChan   map[string]*watch
	stopping map[string]chan struct{} // channel → done of a subscription being ended
	closed   bool
	wg       sync.WaitGroup // subscription goroutines
}

// watch is the subscription to one channel.
type watch struct {
	waiters map[chan struct{}]struct{} // guarded by watchers.mu
	ready   chan struct{}              // closed once subscribed, or failed
	err     error                      // why it failed; set before ready is closed
	cancel  context.CancelFunc         // ends the subscription
	done    chan struct{}              // closed when the server no longer has it
}

// Released implements driver.Notifier. The returned channel receives a
// value after each release of key. It is subscribed when Released
// returns, and stays subscribed until stop is called or ctx is done. If
// the connection breaks, the client library subscribes again when it
// reconnects and the channel receives a value then too, because a release
// may have been missed in the gap. Waiters on one key share one
// subscription per Backend.
//
// Notices use sharded pub/sub (SPUBLISH, SSUBSCRIBE) on Redis 7.0 and
// later: on a cluster a notice then travels only to the node that owns the
// key's slot, instead of being broadcast to every node. When that slot
// moves to another node, the node ends the subscription; the waiters are
// woken, and the next Released subscribes on the new owner. Older servers
// use PUBLISH and SUBSCRIBE.
func (b *Backend) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := check(ctx, key); err != nil {
		return nil, nil, err
	}
	channel := b.names(key).channel
	w := b.watchers
	ch := make(chan struct{}, 1)

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, nil, fmt.Errorf("redis: subscribe: %w", turnstile.ErrClosed)
	}
	if w.byChan == nil {
		w.byChan = make(map[string]*watch)
		w.stopping = make(map[string]chan struct{})
	}
	sub := w.byChan[channel]
	if sub == nil {
		sub = w.startWatch(channel)
	}
	sub.waiters[ch] = struct{}{}
	w.mu.Unlock()

	var once sync.Once
	stop := func() { once.Do(func() { w.unwatch(channel, sub, ch) }) }
	select {
	case <-sub.ready:
		if sub.err != nil {
			stop()
			return nil, nil, sub.err
		}
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
	release := context.AfterFunc(ctx, stop)
	return ch, func() { release(); stop() }, nil
}

// startWatch subscribes to channel in the background. Called with w.mu
// held.
func (w *watchers) startWatch(channel string) *watch {
	ctx, cancel := context.WithCancel(context.Background())
	sub := &watch{
		waiters: make(map[chan struct{}]struct{}),
		ready:   make(chan struct{}),
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	w.byChan[channel] = sub
	// The unsubscribe of the previous subscription, still on its way,
	// would cancel this one's subscribe, so wait for it first.
	prev := w.stopping[channel]
	var readyOnce sync.Once
	w.wg.Go(func() {
		defer func() {
			w.mu.Lock()
			if w.stopping[channel] == sub.done {
				delete(w.stopping, channel)
			}
			w.mu.Unlock()
			close(sub.done)
		}()
		var err error
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if err == nil {
			err = w.conn.subscribe(ctx, channel,
				func() { readyOnce.Do(func() { close(sub.ready) }) },
				func() { w.notify(sub) },
			)
		}
		w.mu.Lock()
		if w.byChan[channel] == sub {
			delete(w.byChan, channel)
		}
		w.mu.Unlock()
		if ctx.Err() == nil {
			// Ended, not stopped (the client was closed): wake the waiters
			// so that they do not wait for a notice that cannot come.
			w.notify(sub)
		}
		readyOnce.Do(func() {
			sub.err = errors.Join(fmt.Errorf("redis: subscribe to %s failed", channel), err)
			close(sub.ready)
		})
	})
	return sub
}

func (w *watchers) notify(sub *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range sub.waiters {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// unwatch removes one waiter, and the subscription with the last one.
func (w *watchers) unwatch(channel string, sub *watch, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(sub.waiters, ch)
	if len(sub.waiters) == 0 {
		if w.byChan[channel] == sub {
			delete(w.byChan, channel)
			w.stopping[channel] = sub.done
		}
		sub.cancel()
	}
}

// registry holds the watchers of every client some Backend uses.
var registry struct {
	mu sync.Mutex
	m  map[any]*watchers
}

// watchersFor returns the watchers of c's client, shared with every other
// Backend over it. The Backend gives them back with release.
func watchersFor(c conn) *watchers {
	id := c.identity()
	if t := reflect.TypeOf(id); t == nil || !t.Comparable() {
		id = c // a client that cannot be a map key is not shared
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.m == nil {
		registry.m = make(map[any]*watchers)
	}
	w := registry.m[id]
	if w == nil {
		w = &watchers{conn: c, id: id}
		registry.m[id] = w
	}
	w.refs++
	return w
}

// release gives w back; the last Backend to give it back ends its
// subscriptions.
func (w *watchers) release() {
	registry.mu.Lock()
	w.refs--
	last := w.refs == 0
	if last && registry.m[w.id] == w {
		delete(registry.m, w.id)
	}
	registry.mu.Unlock()
	if last {
		w.close()
	}
}

// close ends every subscription and waits until they are gone.
func (w *watchers) close() {
	w.mu.Lock()
	w.closed = true
	for _, sub := range w.byChan {
		sub.cancel()
	}
	w.byChan = nil
	w.mu.Unlock()
	w.wg.Wait()
}

// unknownCommand reports whether a server error says the command does not
// exist, as Redis before 7.0 says of SSUBSCRIBE. Any other refusal (ACL,
// cluster redirection) is no reason to fall back to plain pub/sub, which
// the release script would not publish on. rueidis strips the "ERR "
// that go-redis keeps.
func unknownCommand(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.HasPrefix(strings.TrimPrefix(msg, "err "), "unknown command")
}

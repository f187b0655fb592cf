package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile/driver"
)

var _ driver.Notifier = (*Backend)(nil)

// releasedChannel is the NOTIFY channel releases are announced on, with
// the key as payload (turnstile.MaxKeyLen is far below NOTIFY's 8000-byte
// payload limit).
const releasedChannel = "turnstile_released"

// listener is one LISTEN connection per Backend, opened when a waiter
// first asks for release notices and kept until Close. It is a connection
// beyond WithConns.
type listener struct {
	mu      sync.Mutex
	running bool
	closed  bool
	subs    map[string]map[chan struct{}]struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Released implements driver.Notifier. The channel receives a value after
// key is released through any Backend on the database, and after the
// listening connection broke and was dialled again (a release may have
// been missed in the gap). The first call opens the listening connection.
func (b *Backend) Released(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	l := &b.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, errClosed
	}
	if !l.running {
		conn, err := b.dialListener(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: listen: %w", b.name, permission(err))
		}
		lctx, cancel := context.WithCancel(context.Background())
		l.running, l.cancel = true, cancel
		l.subs = map[string]map[chan struct{}]struct{}{}
		l.wg.Go(func() { b.listenLoop(lctx, conn) })
	}
	ch := make(chan struct{}, 1)
	if l.subs[key] == nil {
		l.subs[key] = map[chan struct{}]struct{}{}
	}
	l.subs[key][ch] = struct{}{}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.subs[key], ch)
			if len(l.subs[key]) == 0 {
				delete(l.subs, key)
			}
		})
	}
	release := context.AfterFunc(ctx, stop)
	return ch, func() { release(); stop() }, nil
}

func (b *Backend) dialListener(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.opTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, b.connCfg.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+releasedChannel); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listenLoop hands notices to waiters until ctx is cancelled, dialling
// again when the connection breaks.
func (b *Backend) listenLoop(ctx context.Context, conn *pgx.Conn) {
	l := &b.listen
	for {
		n, err := conn.WaitForNotification(ctx)
		if err == nil {
			l.wake(n.Payload)
			continue
		}
		_ = conn.Close(context.Background())
		for failures := 1; ; failures++ {
			if ctx.Err() != nil {
				return
			}
			l.wake("") // notices may have been lost
			select {
			case <-ctx.Done():
				return
			case <-time.After(dialRetry(failures)):
			}
			if conn, err = b.dialListener(ctx); err == nil {
				break
			}
		}
	}
}

// wake signals the waiters on key, or every waiter if key is "".
func (l *listener) wake(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, chs := range l.subs {
		if key != "" && k != key {
			continue
		}
		for ch := range chs {
			select {
			case ch <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	}
}

func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

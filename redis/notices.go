package redis

import (
	"context"
	"sync"

	"github.com/redis/rueidis"
)

// noticeClient is a second rueidis client, of one connection per node,
// that a Backend which dialled its own client (Dial, a URL) opens at its
// first subscription to release notices, and serves every subscription
// on. rueidis multiplexes RESP3 subscriptions on the first of the
// connections that also carry commands, and a connection that has
// served a subscription stays in rueidis's background mode for good:
// every round trip of a lone caller on it then goes through a writer and
// a reader goroutine, and a lock client that once waited for a key paid
// that on every pair after (docs/performance.md, "One worker, one
// node"). On a connection of their own the notices leave the lock
// commands on the synchronous path. Over RESP2 rueidis keeps subscriptions on a
// connection of their own already.
type noticeClient struct {
	opt     rueidis.ClientOption
	mu      sync.Mutex
	c       rueidis.Client // nil until dialled
	dialing chan struct{}  // closed when the dial on its way ends; nil if none
	closed  bool
	wg      sync.WaitGroup // the dial on its way
}

func newNoticeClient(opt rueidis.ClientOption) *noticeClient {
	if opt.AlwaysRESP2 {
		return nil
	}
	opt.PipelineMultiplex = -1 // one connection per node
	return &noticeClient{opt: opt}
}

// client returns the notice client, dialling it at the first call, or
// nil when n is nil or closed, when dialling failed, or when ctx ends
// first: the subscription then shares the lock client, and a later one
// dials again (or takes the client the dial on its way made). rueidis
// dials without a context, so the dial runs on a goroutine of its own,
// which ctx does not hold up.
func (n *noticeClient) client(ctx context.Context) rueidis.Client {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	if n.c != nil || n.closed {
		c := n.c
		n.mu.Unlock()
		return c
	}
	if n.dialing == nil {
		n.dialing = make(chan struct{})
		n.wg.Add(1)
		go n.dial(n.dialing)
	}
	dialing := n.dialing
	n.mu.Unlock()
	select {
	case <-dialing:
	case <-ctx.Done():
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.c
}

// dial dials the notice client and closes done when it is kept or given
// up.
func (n *noticeClient) dial(done chan struct{}) {
	defer n.wg.Done()
	c, err := rueidis.NewClient(n.opt)
	n.mu.Lock()
	defer n.mu.Unlock()
	defer close(done)
	n.dialing = nil
	if err != nil || n.closed {
		if c != nil {
			c.Close()
		}
		return
	}
	n.c = c
}

// close closes the notice client, once the dial on its way, if any,
// ended; later subscriptions share the lock client (closed too by then).
func (n *noticeClient) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.closed = true
	c := n.c
	n.mu.Unlock()
	n.wg.Wait()
	if c != nil {
		c.Close()
	}
}

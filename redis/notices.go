package redis

import (
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
// 112 µs per uncontended pair instead of 78 (docs/performance.md). On a
// connection of their own the notices leave the lock commands on the
// synchronous path. Over RESP2 rueidis keeps subscriptions on a
// connection of their own already.
type noticeClient struct {
	opt    rueidis.ClientOption
	mu     sync.Mutex
	c      rueidis.Client // nil until the first subscription
	closed bool
}

func newNoticeClient(opt rueidis.ClientOption) *noticeClient {
	if opt.AlwaysRESP2 {
		return nil
	}
	opt.PipelineMultiplex = -1 // one connection per node
	return &noticeClient{opt: opt}
}

// client returns the notice client, dialling it at the first call, or
// nil when n is nil, closed, or dialling failed: the subscription then
// shares the lock client, and the next one dials again.
func (n *noticeClient) client() rueidis.Client {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c != nil || n.closed {
		return n.c
	}
	c, err := rueidis.NewClient(n.opt)
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil
	}
	n.c = c
	return c
}

// close closes the notice client, if it was dialled; later subscriptions
// share the lock client (closed too by then).
func (n *noticeClient) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.c != nil {
		n.c.Close()
	}
}

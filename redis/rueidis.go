package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// rueidisScripts are shared by every rueidis client: a Lua value only
// holds the source and its SHA-1.
var rueidisScripts = func() (s [numScripts]*rueidis.Lua) {
	for i, src := range sources {
		s[i] = rueidis.NewLuaScript(src)
	}
	return s
}()

// unsubscribeTimeout bounds the UNSUBSCRIBE that ends a subscription.
const unsubscribeTimeout = 2 * time.Second

// rueidisConn runs the scripts on a rueidis client. rueidis pipelines
// concurrent commands on shared connections by itself, and its Lua helper
// falls back from EVALSHA to EVAL when the server lost its script cache.
type rueidisConn struct {
	c    rueidis.Client
	owns bool
	wait waitConfig // WithWaitReplicas: renewals wait for replicas
}

func (r *rueidisConn) eval(ctx context.Context, s script, c call) (int64, error) {
	if s == extendScript && r.wait.replicas > 0 {
		rep := r.evalWait(ctx, sources[s], plainSHA[s], []call{c}, "extend")[0]
		return rep.n, rep.err
	}
	n, err := rueidisScripts[s].Exec(ctx, r.c, c.keys, c.args).AsInt64()
	notOurs := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if err != nil && ctx.Err() == nil && (notOurs || (s == releaseScript && connectionLost(err))) {
		// Run once more. A context error that is not this call's:
		// rueidis closes a pipelined connection when a call on it is
		// cancelled while in flight (here, a subscription being renewed
		// after a reconnect and stopped at the same moment), and fails
		// every call sharing it with that call's error. A release whose
		// connection closed under it (a killed client, a server's
		// timeout) may or may not have run, and would otherwise leave
		// the lock standing until its TTL. Every script is safe to run
		// again: acquire and extend by the same owner, and release, are
		// owner-checked.
		n, err = rueidisScripts[s].Exec(ctx, r.c, c.keys, c.args).AsInt64()
	}
	return n, storeError(err, sources[s], c, "")
}

// connectionLost reports whether err is a connection that closed under
// a call, not an answer of the server.
func connectionLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}

func (r *rueidisConn) failsOver() bool {
	m := r.c.Mode()
	return m == rueidis.ClientModeSentinel || m == rueidis.ClientModeCluster
}

func (r *rueidisConn) serverTime(ctx context.Context) (int64, error) {
	parts, err := r.c.Do(ctx, r.c.B().Time().Build()).AsIntSlice()
	if err != nil {
		return 0, err
	}
	if len(parts) != 2 {
		return 0, fmt.Errorf("redis: TIME answered %d values, want 2", len(parts))
	}
	return parts[0]*1_000_000 + parts[1], nil
}

// evalsha is the EVALSHA of the script whose SHA-1 is sha for c.
func evalsha(b rueidis.Builder, sha string, c call) rueidis.Completed {
	return b.Evalsha().Sha1(sha).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
}

// evalMulti runs calls of s as evalMany does: EVALSHAs in one pipelined
// write, with no SCRIPT LOAD before them; a call refused with NOSCRIPT
// runs again alone through eval. With WithWaitReplicas, renewals wait
// for the replicas (evalWait).
func (r *rueidisConn) evalMulti(ctx context.Context, s script, cs []call) []reply {
	if s == extendScript && r.wait.replicas > 0 {
		return r.evalWait(ctx, sources[s], plainSHA[s], cs, "extend")
	}
	return r.evalMany(ctx, scriptCalls(s, cs))
}

// evalMany sends every call as an EVALSHA in one pipelined write. A call
// refused with NOSCRIPT (the server lost its script cache), or one that
// eval would have run again (a context error that is not this call's, a
// release whose connection closed under it), runs again alone through
// eval, which falls back to EVAL.
func (r *rueidisConn) evalMany(ctx context.Context, cs []scriptCall) []reply {
	cmds := make(rueidis.Commands, len(cs))
	for i, c := range cs {
		cmds[i] = evalsha(r.c.B(), plainSHA[c.s], c.call)
	}
	out := make([]reply, len(cs))
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		c := cs[i]
		n, err := res.AsInt64()
		notOurs := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		if err != nil && (noScript(err) || (ctx.Err() == nil && (notOurs || (c.s == releaseScript && connectionLost(err))))) {
			out[i].n, out[i].err = r.eval(ctx, c.s, c.call)
			continue
		}
		out[i].n, out[i].err = n, storeError(err, sources[c.s], c.call, "")
	}
	return out
}

// subscribe shares the client's pipelined connection. On a cluster,
// rueidis sends SSUBSCRIBE to the node that owns the channel's slot, and
// after a connection failure (a failover) subscribes again on whichever
// node owns it then. A server older than Redis 7.0 refuses SSUBSCRIBE as
// an unknown command, and its release script publishes with PUBLISH, so
// Released then falls back to SUBSCRIBE.
func (r *rueidisConn) subscribe(ctx context.Context, channel string, ready, message func()) error {
	err := r.receive(ctx, channel, true, ready, message)
	if re, ok := rueidis.IsRedisErr(err); ok && unknownCommand(re.Error()) {
		err = r.receive(ctx, channel, false, ready, message)
	}
	return storeError(err, "", call{}, channel)
}

// receive runs one subscription until ctx ends, the client is closed, or
// the server ends it (as a cluster node does for a shard channel whose
// slot moved away). rueidis subscribes again after a reconnect; that
// confirmation counts as a message, because a release may have been
// missed in between.
//
// When ctx ends, the subscription is ended by an unsubscribe sent while
// rueidis's Receive still drains its messages, and Receive returns on the
// server's confirmation. Receive's messages go through a small buffer
// that the connection's reader fills: a subscription that stops draining
// while the server still sends it notices (Receive's own return hook,
// waiting for an unsubscribe's reply) stops every command on the
// connection — and a subscription left on the server feeds the next one
// on its channel notices before that one's confirmation, which can stop
// the connection for good. Only when the unsubscribe gets no answer
// (the connection is broken) is Receive cancelled, and the channel then
// unsubscribed once nothing listens to it any more.
func (r *rueidisConn) receive(ctx context.Context, channel string, sharded bool, ready, message func()) error {
	var kind string
	var sub rueidis.Completed
	if sharded {
		kind, sub = "ssubscribe", r.c.B().Ssubscribe().Channel(channel).Build()
	} else {
		kind, sub = "subscribe", r.c.B().Subscribe().Channel(channel).Build()
	}
	// rueidis recycles a command once sent: build the unsubscribe anew
	// each time.
	unsubscribe := func() {
		var unsub rueidis.Completed
		if sharded {
			unsub = r.c.B().Sunsubscribe().Channel(channel).Build()
		} else {
			unsub = r.c.B().Unsubscribe().Channel(channel).Build()
		}
		uctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
		defer cancel()
		_ = r.c.Do(uctx, unsub).Error() // a broken connection has no subscriptions left
	}
	var confirmed atomic.Bool
	subscribed := make(chan struct{})
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rctx = rueidis.WithOnSubscriptionHook(rctx, func(s rueidis.PubSubSubscription) {
		if s.Kind != kind || s.Channel != channel {
			return
		}
		if confirmed.Swap(true) {
			message()
		} else {
			close(subscribed)
			ready()
		}
	})
	done := make(chan error, 1)
	go func() { done <- r.c.Receive(rctx, sub, func(rueidis.PubSubMessage) { message() }) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	wait := time.NewTimer(unsubscribeTimeout)
	defer wait.Stop()
	select {
	case <-subscribed: // an unsubscribe sent before the subscribe would be undone by it
	case err := <-done:
		return err
	case <-wait.C:
	}
	if confirmed.Load() {
		unsubscribe()
		wait.Reset(unsubscribeTimeout)
		select {
		case <-done:
			return nil
		case <-wait.C:
		}
	}
	cancel()
	<-done
	unsubscribe()
	return nil
}

// identity is the client: Backends over one client share subscriptions.
func (r *rueidisConn) identity() any { return r.c }

func (r *rueidisConn) addr() string {
	addrs := make([]string, 0, 1)
	for a := range r.c.Nodes() {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}

func (r *rueidisConn) close() {
	if r.owns {
		r.c.Close()
	}
}

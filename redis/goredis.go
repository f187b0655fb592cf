package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/turnstilelock/turnstile"
)

// NewGoRedis returns a Backend over an existing go-redis client: a
// *Client, *ClusterClient, *Ring or failover client. The caller keeps
// owning c; Close on the Backend leaves it open.
func NewGoRedis(c goredis.UniversalClient, opts ...Option) (*Backend, error) {
	if isNil(c) {
		return nil, fmt.Errorf("%w: nil go-redis client", turnstile.ErrInvalidOption)
	}
	return newBackend(&goredisConn{c: c}, opts)
}

// isNil also catches a typed nil pointer in the interface, which would
// otherwise panic at the first command.
func isNil(c goredis.UniversalClient) bool {
	switch v := c.(type) {
	case nil:
		return true
	case *goredis.Client:
		return v == nil
	case *goredis.ClusterClient:
		return v == nil
	case *goredis.Ring:
		return v == nil
	}
	return false
}

var goredisScripts = func() (s [numScripts]*goredis.Script) {
	for i, src := range sources {
		s[i] = goredis.NewScript(src)
	}
	return s
}()

// goredisConn runs the scripts on a go-redis client: EVALSHA, and EVAL
// when the server lost its script cache (Script.Run does both).
type goredisConn struct {
	c goredis.UniversalClient
}

func (g *goredisConn) eval(ctx context.Context, s script, c call) (int64, error) {
	n, err := goredisScripts[s].Run(ctx, g.c, c.keys, anys(c.args)...).Int64()
	return n, storeError(err, sources[s], c, "")
}

// failsOver: a cluster client, or a Sentinel (failover) client, which
// go-redis names by the address "FailoverClient".
func (g *goredisConn) failsOver() bool {
	switch c := g.c.(type) {
	case *goredis.ClusterClient:
		return true
	case *goredis.Client:
		return c.Options().Addr == "FailoverClient"
	}
	return false
}

func (g *goredisConn) serverTime(ctx context.Context) (int64, error) {
	t, err := g.c.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return t.UnixMicro(), nil
}

// evalMulti runs calls of s as evalMany does.
func (g *goredisConn) evalMulti(ctx context.Context, s script, cs []call) []reply {
	return g.evalMany(ctx, scriptCalls(s, cs))
}

// evalMany sends every call as an EVALSHA in one pipeline. A call
// refused with NOSCRIPT runs again alone through eval, which loads the
// script.
func (g *goredisConn) evalMany(ctx context.Context, cs []scriptCall) []reply {
	cmds := make([]*goredis.Cmd, len(cs))
	pipe := g.c.Pipeline()
	for i, c := range cs {
		cmds[i] = goredisScripts[c.s].EvalSha(ctx, pipe, c.keys, anys(c.args)...)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below
	out := make([]reply, len(cs))
	for i, c := range cs {
		n, err := cmds[i].Int64()
		if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			out[i].n, out[i].err = g.eval(ctx, c.s, c.call)
			continue
		}
		out[i].n, out[i].err = n, storeError(err, sources[c.s], c.call, "")
	}
	return out
}

func anys(ss []string) []any {
	a := make([]any, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}

// subscribe uses a connection of its own, as go-redis does for every
// PubSub; a ClusterClient opens it to the node that owns the channel's
// slot. A server older than Redis 7.0 refuses SSUBSCRIBE as an unknown
// command, and its release script publishes with PUBLISH, so Released
// then falls back to SUBSCRIBE.
func (g *goredisConn) subscribe(ctx context.Context, channel string, ready, message func()) (err error) {
	defer func() { err = storeError(err, "", call{}, channel) }()
	for attempt := 0; ; attempt++ {
		err := g.receive(ctx, g.c.SSubscribe(ctx, channel), "sunsubscribe", ready, message)
		var re goredis.Error
		if !errors.As(err, &re) {
			return err
		}
		if unknownCommand(re.Error()) {
			return g.receive(ctx, g.c.Subscribe(ctx, channel), "unsubscribe", ready, message)
		}
		// A ClusterClient whose slot map is out of date (the slot moved)
		// subscribes on the old owner and is redirected; unlike commands,
		// go-redis does not follow that by itself.
		cc, ok := g.c.(*goredis.ClusterClient)
		if !ok || attempt == maxRedirects || !(strings.HasPrefix(re.Error(), "MOVED ") || strings.HasPrefix(re.Error(), "ASK ")) {
			return err
		}
		cc.ReloadState(ctx)
		select {
		case <-time.After(redirectBackoff << attempt):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// A ClusterClient reloads its slot map in the background: the subscription
// is tried again after 10, 20, 40, 80 and 160 ms.
const (
	maxRedirects    = 5
	redirectBackoff = 10 * time.Millisecond
)

// receive runs one subscription until ctx ends, the client is closed, or
// the server ends it (as a cluster node does for a shard channel whose
// slot moved away: go-redis would not follow the slot, so the
// subscription ends and the next Released opens a new one). go-redis
// subscribes again after a reconnect; that confirmation counts as a
// message, because a release may have been missed in between.
func (g *goredisConn) receive(ctx context.Context, ps *goredis.PubSub, unsubKind string, ready, message func()) error {
	defer ps.Close()
	// Closing unblocks Receive when ctx ends.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	if _, err := ps.Receive(ctx); err != nil { // the first confirmation
		return err
	}
	ready()
	for m := range ps.ChannelWithSubscriptions() { // until Close
		if s, ok := m.(*goredis.Subscription); ok && s.Kind == unsubKind {
			return nil
		}
		message()
	}
	return ctx.Err()
}

// identity is the client: Backends over one client share subscriptions.
func (g *goredisConn) identity() any { return g.c }

func (g *goredisConn) addr() string {
	switch c := g.c.(type) {
	case *goredis.Client:
		return c.Options().Addr
	case *goredis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return fmt.Sprintf("%T", g.c)
}

func (g *goredisConn) close() {}

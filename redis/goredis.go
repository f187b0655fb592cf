package redis

import (
	"context"
	"fmt"
	"strings"

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
	return goredisScripts[s].Run(ctx, g.c, c.keys, anys(c.args)...).Int64()
}

// evalMulti sends every call in one pipeline of EVALSHA. If the server
// had lost the script, it loads it and sends the refused calls again.
func (g *goredisConn) evalMulti(ctx context.Context, s script, cs []call) []reply {
	out := make([]reply, len(cs))
	todo := make([]int, len(cs))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		cmds := make([]*goredis.Cmd, len(todo))
		pipe := g.c.Pipeline()
		for j, i := range todo {
			cmds[j] = goredisScripts[s].EvalSha(ctx, pipe, cs[i].keys, anys(cs[i].args)...)
		}
		_, _ = pipe.Exec(ctx) // errors are read per command below
		var again []int
		for j, i := range todo {
			out[i].n, out[i].err = cmds[j].Int64()
			if attempt == 0 && out[i].err != nil && goredis.HasErrorPrefix(out[i].err, "NOSCRIPT") {
				again = append(again, i)
			}
		}
		if len(again) > 0 {
			if err := goredisScripts[s].Load(ctx, g.c).Err(); err != nil {
				for _, i := range again {
					out[i].err = err
				}
				again = nil
			}
		}
		todo = again
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
// PubSub. go-redis subscribes again after a reconnect; that confirmation
// counts as a message, because a release may have been missed in between.
func (g *goredisConn) subscribe(ctx context.Context, channel string, ready, message func()) error {
	ps := g.c.Subscribe(ctx, channel)
	defer ps.Close()
	// Closing unblocks Receive when ctx ends.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	if _, err := ps.Receive(ctx); err != nil { // the first confirmation
		return err
	}
	ready()
	for range ps.ChannelWithSubscriptions() { // until Close
		message()
	}
	return ctx.Err()
}

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

package redis

import (
	"context"
	_ "embed" // the Lua scripts
)

// Each operation is one script, so each is one round trip and atomic on
// the server. Both client adapters run the same sources.
var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed extend.lua
	extendLua string
	//go:embed release.lua
	releaseLua string
	//go:embed raise.lua
	raiseLua string
	// tokenLua defines next_token, the fencing-token clock, for every
	// script that grants a lock.
	//go:embed token.lua
	tokenLua string
)

// script names one of the Lua scripts, as an index into an adapter's table
// of prepared scripts.
type script int

const (
	acquireScript script = iota
	extendScript
	releaseScript
	raiseScript
	numScripts
)

var sources = [numScripts]string{
	acquireScript: tokenLua + acquireLua,
	extendScript:  extendLua,
	releaseScript: releaseLua,
	raiseScript:   raiseLua,
}

// call is one execution of a script.
type call struct {
	keys []string
	args []string
}

// scriptCall is a call of the script s, one of many of evalMany.
type scriptCall struct {
	s script
	call
}

// scriptCalls are cs, each a call of s.
func scriptCalls(s script, cs []call) []scriptCall {
	out := make([]scriptCall, len(cs))
	for i, c := range cs {
		out[i] = scriptCall{s: s, call: c}
	}
	return out
}

// reply is the integer a script returned, or why it did not run.
type reply struct {
	n   int64
	err error
	// unconfirmed: the script wrote a grant or renewal that fewer
	// replicas confirmed than WithWaitReplicas asks for (evalWait).
	unconfirmed bool
}

// conn is what the backend needs from a Redis client: run the scripts,
// alone or many in one pipelined batch. There is one implementation per
// client library, kept small.
type conn interface {
	eval(ctx context.Context, s script, c call) (int64, error)
	evalMulti(ctx context.Context, s script, cs []call) []reply
	// evalMany runs calls of several scripts in one pipelined batch, in
	// their order; each call's reply is what eval would have answered.
	evalMany(ctx context.Context, cs []scriptCall) []reply
	// subscribe listens on channel until ctx is done or the client is
	// closed: it calls ready once the server confirmed the subscription,
	// and message for every message and for every confirmation after a
	// reconnect. The server no longer has the subscription when it returns.
	subscribe(ctx context.Context, channel string, ready, message func()) error
	// serverTime is the server's clock (TIME), in µs since the epoch.
	serverTime(ctx context.Context) (int64, error)
	// failsOver tells whether the client follows primaries that fail over
	// to replicas (Sentinel, Cluster): a grant may then be lost with its
	// fence key (serverClock's off).
	failsOver() bool
	// addr describes the server(s), for Name.
	addr() string
	// identity is the client underneath, comparable: Backends over one
	// client share their subscriptions.
	identity() any
	// close releases the client if the backend owns it.
	close()
}

package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds beside the plain lock — Reentrant, ReadLock and
// WriteLock, Semaphore and Fair — are views of a Backend: each is a driver.Backend of its own, so a
// turnstile.Client over it waits, renews and fences as it does over the
// plain lock. They share the Backend's client, prefix, fence grace and
// release subscriptions. Their scripts are not in the plain lock's table,
// so each kind prepares its own, for whichever client the Backend runs on.

// kindScript is one Lua script of a lock kind, prepared for both client
// libraries: EVALSHA, with EVAL when the server lost its script cache.
type kindScript struct {
	r   *rueidis.Lua
	g   *goredis.Script
	src string // for the line an error names (storeError)
	sha string // src's SHA-1, for EVALSHA with WAIT (evalWait)
	// renews marks a script that renews a lease: with WithWaitReplicas,
	// its renewals wait for the replicas.
	renews bool
}

func newKindScript(src string) *kindScript {
	return &kindScript{r: rueidis.NewLuaScript(src), g: goredis.NewScript(src), src: src, sha: scriptSHA(src)}
}

// newRenewScript is newKindScript for a script that renews leases.
func newRenewScript(src string) *kindScript {
	s := newKindScript(src)
	s.renews = true
	return s
}

// run executes s once and returns its integer reply.
func (b *Backend) run(ctx context.Context, s *kindScript, c call) (int64, error) {
	if s.renews && b.waits() {
		rep := b.conn.(*rueidisConn).evalWait(ctx, s.src, s.sha, []call{c}, "extend")[0]
		return rep.n, rep.err
	}
	return execOne(ctx, b, s, c, rueidis.RedisResult.AsInt64, (*goredis.Cmd).Int64,
		"redis: lock kinds do not support client %T")
}

// execOne executes s once and reads its reply with fromR over rueidis,
// with fromG over go-redis. Over any other client it fails with
// unsupported, a format of the client's type.
func execOne[T any](ctx context.Context, b *Backend, s *kindScript, c call,
	fromR func(rueidis.RedisResult) (T, error), fromG func(*goredis.Cmd) (T, error), unsupported string) (T, error) {
	var v T
	var err error
	switch cn := b.conn.(type) {
	case *rueidisConn:
		v, err = fromR(s.r.Exec(ctx, cn.c, c.keys, c.args))
	case *goredisConn:
		v, err = fromG(s.g.Run(ctx, cn.c, c.keys, anys(c.args)...))
	default:
		return v, fmt.Errorf(unsupported, b.conn)
	}
	return v, storeError(err, s.src, c, "")
}

// runGrant executes s, a kind's acquisition, once and returns its
// reply. With WithWaitReplicas it waits for the replicas and runs undo
// when too few confirmed the grant (grant).
func (b *Backend) runGrant(ctx context.Context, s *kindScript, c call, undo func(context.Context)) (int64, error) {
	if b.waits() {
		return b.grant(ctx, s.src, s.sha, c, undo)
	}
	return b.run(ctx, s, c)
}

// leaseOf turns an acquisition's reply into Acquire's results: a
// positive reply is the token of the lease granted, any other a refusal.
func leaseOf(tok int64, err error) (uint64, bool, error) {
	if err != nil {
		return 0, false, err
	}
	return uint64(max(tok, 0)), tok > 0, nil
}

// runMulti executes s once per call in one pipelined batch.
func (b *Backend) runMulti(ctx context.Context, s *kindScript, cs []call) []reply {
	if s.renews && b.waits() {
		return b.conn.(*rueidisConn).evalWait(ctx, s.src, s.sha, cs, "extend")
	}
	ns, errs := execMulti(ctx, b, s, cs, rueidis.RedisResult.AsInt64, (*goredis.Cmd).Int64,
		"redis: lock kinds do not support client %T")
	out := make([]reply, len(cs))
	for i := range out {
		out[i] = reply{n: ns[i], err: errs[i]}
	}
	return out
}

// execMulti executes s once per call in one pipelined batch of EVALSHAs
// and reads each reply with fromR over rueidis, with fromG over
// go-redis. Nothing loads the script before the batch: a call refused
// with NOSCRIPT (the server lost its scripts) runs again alone, as
// execOne runs it, which sends the script's source when the server
// still lacks it. Over any other client every call fails with
// unsupported, a format of the client's type.
func execMulti[T any](ctx context.Context, b *Backend, s *kindScript, cs []call,
	fromR func(rueidis.RedisResult) (T, error), fromG func(*goredis.Cmd) (T, error), unsupported string) ([]T, []error) {
	out := make([]T, len(cs))
	errs := make([]error, len(cs))
	switch cn := b.conn.(type) {
	case *rueidisConn:
		cmds := make(rueidis.Commands, len(cs))
		for i, c := range cs {
			cmds[i] = evalsha(cn.c.B(), s.sha, c)
		}
		for i, r := range cn.c.DoMulti(ctx, cmds...) {
			if noScript(r.Error()) {
				r = s.r.Exec(ctx, cn.c, cs[i].keys, cs[i].args)
			}
			out[i], errs[i] = fromR(r)
		}
	case *goredisConn:
		pipe := cn.c.Pipeline()
		cmds := make([]*goredis.Cmd, len(cs))
		for i, c := range cs {
			cmds[i] = s.g.EvalSha(ctx, pipe, c.keys, anys(c.args)...)
		}
		_, _ = pipe.Exec(ctx) // errors are read per command below
		for i, cmd := range cmds {
			if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
				cmd = s.g.Run(ctx, cn.c, cs[i].keys, anys(cs[i].args)...)
			}
			out[i], errs[i] = fromG(cmd)
		}
	default:
		for i := range errs {
			errs[i] = fmt.Errorf(unsupported, b.conn)
		}
	}
	for i := range errs {
		errs[i] = storeError(errs[i], s.src, cs[i], "")
	}
	return out, errs
}

// extendMany renews a batch of leases of one kind in one pipelined round
// trip: mk builds each request's call, run sends them.
func extendMany(ctx context.Context, reqs []driver.ExtendRequest, mk func(driver.ExtendRequest) call, run func(context.Context, []call) []reply) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	calls := make([]call, 0, len(reqs))
	index := make([]int, 0, len(reqs)) // calls[j] is reqs[index[j]]
	for i, r := range reqs {
		if err := checkLease(ctx, r.Key, r.Owner, r.TTL); err != nil {
			res[i].Err = err
			continue
		}
		calls = append(calls, mk(r))
		index = append(index, i)
	}
	if len(calls) == 0 {
		return res
	}
	for j, rep := range run(ctx, calls) {
		res[index[j]] = driver.ExtendResult{OK: rep.err == nil && rep.n == 1, Err: rep.err}
	}
	return res
}

// checkLease refuses, before any round trip, what the kinds' scripts
// cannot work with: an empty key or owner, or a TTL under turnstile.MinTTL.
func checkLease(ctx context.Context, key, owner string, ttl time.Duration) error {
	if err := checkOwner(ctx, key, owner); err != nil {
		return err
	}
	if ttl < turnstile.MinTTL {
		return fmt.Errorf("%w: %v is shorter than %v", turnstile.ErrInvalidTTL, ttl, turnstile.MinTTL)
	}
	return nil
}

// checkOwner is checkLease for calls without a TTL.
func checkOwner(ctx context.Context, key, owner string) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	if err := check(ctx, key); err != nil {
		return err
	}
	if owner == "" {
		return fmt.Errorf("%w: empty owner", turnstile.ErrInvalidOption)
	}
	return nil
}

// ttlArgs renders the TTLs every kind's acquire and extend script takes:
// the lock's and its fence's, which outlives it by the grace period.
func (b *Backend) ttlArgs(ttl time.Duration) (lockTTL, fenceTTL string) {
	// A Client asks with one TTL almost always: keep its strings.
	if t := b.ttls.Load(); t != nil && t.ttl == ttl {
		return t.lock, t.fence
	}
	t := &ttlStrings{ttl: ttl, lock: millis(ttl), fence: millis(ttl + b.cfg.grace)}
	b.ttls.Store(t)
	return t.lock, t.fence
}

// ttlStrings are one TTL's script arguments.
type ttlStrings struct {
	ttl         time.Duration
	lock, fence string
}

// multi returns the batch runner of s for extendMany.
func (b *Backend) multi(s *kindScript) func(context.Context, []call) []reply {
	return func(ctx context.Context, cs []call) []reply { return b.runMulti(ctx, s, cs) }
}

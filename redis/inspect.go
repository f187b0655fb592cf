package redis

import (
	"context"
	_ "embed" // the Lua scripts
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

var (
	//go:embed inspect.lua
	inspectLua string
	//go:embed force_release.lua
	forceReleaseLua string

	inspectScript      = newKindScript(inspectLua)
	forceReleaseScript = newKindScript(tokenLua + forceReleaseLua) // room_up
)

var (
	_ driver.Inspector     = (*Backend)(nil)
	_ driver.ForceReleaser = (*Backend)(nil)
	_ driver.Inspector     = (*Fair)(nil)
	_ driver.ForceReleaser = (*Fair)(nil)
)

// scanCount is the COUNT hint of each SCAN call of List: how many keys
// the server looks at per round trip.
const scanCount = 1000

// Inspect implements driver.Inspector with one script: it reads the lock
// key (its owner and PTTL) and the fence key (the last token issued).
// The plain lock keeps no queue, so Waiters is -1; the Fair view counts
// its queue's live waiters.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return b.inspect(ctx, key, false)
}

// List implements driver.Inspector with SCAN: MATCH on the lock keys of
// the prefix (P{prefix*}, with P the Backend's WithPrefix), COUNT 1000 per
// round trip, on every node of a cluster; then one pipelined batch of the
// Inspect script for the keys found. SCAN walks the whole keyspace of the
// database, incrementally: a full scan costs O(keys in the database)
// however few locks it finds, spread over about keys/1000 round trips per
// node, none of which blocks the server for long. It stops as soon as it
// has found limit held locks and one more (more=true). A key of the
// pattern that holds no string with an expiry is not a lock and is
// skipped.
func (b *Backend) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return b.list(ctx, prefix, limit, false)
}

// ForceRelease implements driver.ForceReleaser with one script: it reads
// the holder and its token T from the fence key. The holder may be a
// lease its Client was handed without the store (TokenRoom), with a token
// up to T − T mod 16 + 15, so the fence floor is the next multiple of 16
// above T. It raises the fence key to the floor (every later token is at
// least 16 above it) and the guard key of package fence for the same
// resource (GuardKey), if there is one, to at least the floor, so that
// fenced Redis storage refuses every token the removed holder may carry,
// with or without fence.AllowSameToken, and takes the next holder's; then
// it deletes the lock and sends the release notice as Release does. The
// returned Token is the floor. A free key is left as it is.
func (b *Backend) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if err := check(ctx, key); err != nil {
		return driver.LockState{}, err
	}
	n := b.names(key)
	r, err := b.runStrings(ctx, forceReleaseScript, call{
		keys: []string{n.lock, n.fence, b.GuardKey(key)},
		args: []string{b.cfg.graceArg, n.channel},
	})
	if err != nil {
		return driver.LockState{}, err
	}
	st, err := parseState(key, r, false)
	if err != nil {
		return driver.LockState{}, err
	}
	floor, err := strconv.ParseUint(r[3], 10, 64)
	if err != nil {
		return driver.LockState{}, fmt.Errorf("redis: force release of %s: fence floor %q: %w", n.lock, r[3], err)
	}
	st.Token = floor
	return st, nil
}

// Inspect implements driver.Inspector: the plain lock's state, with the
// number of live waiters in key's queue.
func (f *Fair) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return f.b.inspect(ctx, key, true)
}

// List implements driver.Inspector as Backend.List does, with each
// lock's live waiters.
func (f *Fair) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return f.b.list(ctx, prefix, limit, true)
}

// ForceRelease implements driver.ForceReleaser: the fair lock is the
// plain lock, and the release notice wakes the first waiters.
func (f *Fair) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return f.b.ForceRelease(ctx, key)
}

func (b *Backend) inspectCall(key string, fair bool) call {
	n := b.names(key)
	c := call{keys: []string{n.lock, n.fence}}
	if fair {
		c.keys = append(c.keys, n.kindKey(rediskeys.QueueAlive))
	}
	return c
}

func (b *Backend) inspect(ctx context.Context, key string, fair bool) (driver.LockState, error) {
	if err := check(ctx, key); err != nil {
		return driver.LockState{}, err
	}
	r, err := b.runStrings(ctx, inspectScript, b.inspectCall(key, fair))
	if err != nil {
		return driver.LockState{}, err
	}
	return parseState(key, r, fair)
}

// parseState reads the reply of the inspect or force-release script.
func parseState(key string, r []string, fair bool) (driver.LockState, error) {
	st := driver.LockState{Key: key, Waiters: -1}
	if len(r) != 4 {
		return st, fmt.Errorf("redis: lock state of %q: %d values in the script's reply, want 4", key, len(r))
	}
	pttl, err1 := strconv.ParseInt(r[1], 10, 64)
	tok, err2 := strconv.ParseUint(r[2], 10, 64)
	waiters, err3 := strconv.Atoi(r[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return st, fmt.Errorf("redis: lock state of %q: malformed reply %q", key, r)
	}
	st.Token = tok
	if fair {
		st.Waiters = waiters
	}
	if r[0] == "" || pttl == -2 {
		return st, nil
	}
	ttl := time.Duration(-1)
	if pttl >= 0 {
		ttl = time.Duration(pttl) * time.Millisecond
	}
	st.Held = true
	st.Holders = []driver.Holder{{Owner: r[0], Token: tok, TTL: ttl}}
	return st, nil
}

func (b *Backend) list(ctx context.Context, prefix string, limit int, fair bool) ([]driver.LockState, bool, error) {
	return b.listWith(ctx, prefix, limit, lister{
		script:   inspectScript,
		patterns: []string{globEscape(b.cfg.prefix+"{"+escapeKey(prefix)) + "*}"},
		keyOf:    b.lockKeyOf,
		call:     func(k string) call { return b.inspectCall(k, fair) },
		parse: func(k string, r []string) (driver.LockState, bool, error) {
			st, err := parseState(k, r, fair)
			// A string without expiry is no lock, whatever its key.
			return st, err == nil && st.Held && st.Holders[0].TTL >= 0, err
		},
	})
}

// lister says how List finds one lock kind's keys and reads their state.
type lister struct {
	script   *kindScript                    // the inspect script
	patterns []string                       // SCAN MATCH patterns
	keyOf    func(rk string) (string, bool) // the lock key of a Redis key found
	call     func(key string) call          // the inspect script's call for key
	// parse reads the script's reply; keep is false for a lock not held.
	parse func(key string, r []string) (st driver.LockState, keep bool, err error)
}

// listWith runs List for the kind l describes: SCAN with each of its
// patterns, and the inspect script, pipelined, for each batch of keys
// found, until limit held locks and one more are found.
func (b *Backend) listWith(ctx context.Context, prefix string, limit int, l lister) ([]driver.LockState, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if limit <= 0 {
		return nil, false, fmt.Errorf("redis: list limit %d must be positive", limit)
	}
	var (
		out  []driver.LockState
		more bool
	)
	// Keys are inspected in batches as SCAN finds them, so that a large
	// keyspace is never held in memory; a key seen twice (a SCAN may
	// return one more than once, and replicas return their primary's) is
	// inspected once.
	seen := make(map[string]struct{})
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		calls := make([]call, len(batch))
		for i, k := range batch {
			calls[i] = l.call(k)
		}
		replies, errs := b.runStringsMulti(ctx, l.script, calls)
		for i, k := range batch {
			if errs[i] != nil {
				return errs[i]
			}
			st, keep, err := l.parse(k, replies[i])
			if err != nil {
				return err
			}
			if !keep {
				continue // expired meanwhile, or no lock
			}
			if len(out) == limit {
				more = true
				return errStopScan
			}
			out = append(out, st)
		}
		batch = batch[:0]
		return nil
	}
	var err error
	for _, pattern := range l.patterns {
		err = b.scan(ctx, pattern, func(keys []string) error {
			for _, rk := range keys {
				k, ok := l.keyOf(rk)
				if !ok {
					continue
				}
				if _, dup := seen[k]; dup {
					continue
				}
				seen[k] = struct{}{}
				batch = append(batch, k)
			}
			if len(batch) >= scanCount {
				return flush()
			}
			return nil
		})
		if err != nil {
			break
		}
	}
	if err == nil {
		err = flush()
	}
	if err != nil && err != errStopScan {
		return nil, false, err
	}
	return out, more, nil
}

var errStopScan = fmt.Errorf("redis: scan stopped")

// escapeKey is the escape names applies to a key (or a prefix of one).
func escapeKey(key string) string { return rediskeys.Escape(key) + key }

// lockKeyOf returns the lock key whose Redis lock key is rk, which SCAN
// matched with P{…*}: ok is false for a key that cannot be one.
func (b *Backend) lockKeyOf(rk string) (string, bool) {
	k, ok := strings.CutPrefix(rk, b.cfg.prefix+"{")
	if !ok {
		return "", false
	}
	k, ok = strings.CutSuffix(k, "}")
	if !ok || k == "" {
		return "", false
	}
	if k[0] == '\\' {
		k = k[1:]
		if k == "" || (k[0] != '}' && k[0] != '\\') {
			return "", false // not a key names would escape
		}
	} else if k[0] == '}' {
		return "", false
	}
	if b.names(k).lock != rk {
		return "", false
	}
	return k, true
}

// globEscape escapes the characters SCAN's MATCH treats as a pattern.
func globEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// scan runs SCAN MATCH pattern COUNT scanCount to its end on every node
// (every node of a cluster, each primary once), calling found with each
// batch of keys, until found returns an error.
func (b *Backend) scan(ctx context.Context, pattern string, found func([]string) error) error {
	switch cn := b.conn.(type) {
	case *rueidisConn:
		nodes := cn.c.Nodes()
		if cn.c.Mode() == rueidis.ClientModeStandalone || len(nodes) == 0 {
			nodes = map[string]rueidis.Client{"": cn.c}
		}
		for _, nc := range nodes {
			if cn.c.Mode() == rueidis.ClientModeCluster {
				role, err := nc.Do(ctx, nc.B().Role().Build()).ToArray()
				if err != nil {
					return fmt.Errorf("redis: scan: ROLE: %w", storeError(err, "", call{}, ""))
				}
				if r, _ := role[0].ToString(); r != "master" {
					continue // a replica: its primary is scanned
				}
			}
			var cursor uint64
			for {
				e, err := nc.Do(ctx, nc.B().Scan().Cursor(cursor).Match(pattern).Count(scanCount).Build()).AsScanEntry()
				if err != nil {
					return fmt.Errorf("redis: scan: %w", storeError(err, "", call{}, ""))
				}
				if err := found(e.Elements); err != nil {
					return err
				}
				if cursor = e.Cursor; cursor == 0 {
					break
				}
			}
		}
		return nil
	case *goredisConn:
		each := func(ctx context.Context, c *goredis.Client) error {
			var cursor uint64
			for {
				keys, next, err := c.Scan(ctx, cursor, pattern, scanCount).Result()
				if err != nil {
					return fmt.Errorf("redis: scan: %w", storeError(err, "", call{}, ""))
				}
				if err := found(keys); err != nil {
					return err
				}
				if cursor = next; cursor == 0 {
					return nil
				}
			}
		}
		switch c := cn.c.(type) {
		case *goredis.Client:
			return each(ctx, c)
		case *goredis.ClusterClient:
			// found is not safe for concurrent use: one primary at a time.
			return oneAtATime(ctx, c.ForEachMaster, each)
		case *goredis.Ring:
			return oneAtATime(ctx, c.ForEachShard, each)
		}
		return fmt.Errorf("redis: listing locks is not supported over a go-redis %T", cn.c)
	}
	return fmt.Errorf("redis: listing locks is not supported over client %T", b.conn)
}

// oneAtATime runs each on every client that forEach visits, which
// visits them concurrently, one client at a time.
func oneAtATime(ctx context.Context, forEach func(context.Context, func(context.Context, *goredis.Client) error) error, each func(context.Context, *goredis.Client) error) error {
	var mu sync.Mutex
	return forEach(ctx, func(ctx context.Context, c *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		return each(ctx, c)
	})
}

// runStrings executes s once and returns its reply, an array of strings.
func (b *Backend) runStrings(ctx context.Context, s *kindScript, c call) ([]string, error) {
	return execOne(ctx, b, s, c, rueidis.RedisResult.AsStrSlice, (*goredis.Cmd).StringSlice,
		"redis: inspecting locks is not supported over client %T")
}

// runStringsMulti executes s once per call in one pipelined batch.
func (b *Backend) runStringsMulti(ctx context.Context, s *kindScript, cs []call) ([][]string, []error) {
	return execMulti(ctx, b, s, cs, rueidis.RedisResult.AsStrSlice, (*goredis.Cmd).StringSlice,
		"redis: inspecting locks is not supported over client %T")
}

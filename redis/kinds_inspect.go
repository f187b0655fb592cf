package redis

import (
	"context"
	_ "embed" // the Lua script
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

//go:embed kind_inspect.lua
var kindInspectLua string

var kindInspectScript = newKindScript(tokenLua + kindInspectLua) // room_up

var (
	_ driver.Inspector     = (*Semaphore)(nil)
	_ driver.ForceReleaser = (*Semaphore)(nil)
	_ driver.Inspector     = (*ReadLock)(nil)
	_ driver.ForceReleaser = (*ReadLock)(nil)
	_ driver.Inspector     = (*WriteLock)(nil)
	_ driver.ForceReleaser = (*WriteLock)(nil)
	_ driver.Inspector     = (*Reentrant)(nil)
	_ driver.ForceReleaser = (*Reentrant)(nil)
)

// kindView inspects and force-releases the locks of a lock kind with
// several holders or a count, in one script each (kind_inspect.lua).
type kindView struct {
	b        *Backend
	kind     string             // the script's name for it: set, rw, reentrant
	suffixes []rediskeys.Suffix // its keys' suffixes (kindKey), in the script's order
}

func (v kindView) call(key string, force bool) call {
	n := v.b.names(key)
	keys := make([]string, 0, len(v.suffixes)+2)
	for _, s := range v.suffixes {
		keys = append(keys, n.kindKey(s))
	}
	mode := "inspect"
	if force {
		mode = "force"
	}
	return call{keys: append(keys, n.fence, v.b.GuardKey(key)), args: []string{v.kind, mode, v.b.cfg.graceArg, n.channel}}
}

// parse reads the script's reply: the key's last token, the fence floor,
// and three strings per holder.
func (v kindView) parse(key string, r []string) (st driver.LockState, floor uint64, err error) {
	st = driver.LockState{Key: key, Waiters: -1}
	bad := fmt.Errorf("redis: %s lock state of %q: malformed reply %q", v.kind, key, r)
	if len(r) < 2 || (len(r)-2)%3 != 0 {
		return st, 0, bad
	}
	if st.Token, err = strconv.ParseUint(r[0], 10, 64); err != nil {
		return st, 0, bad
	}
	if floor, err = strconv.ParseUint(r[1], 10, 64); err != nil {
		return st, 0, bad
	}
	for i := 2; i < len(r); i += 3 {
		tok, err1 := strconv.ParseUint(r[i+1], 10, 64)
		ms, err2 := strconv.ParseInt(r[i+2], 10, 64)
		if err1 != nil || err2 != nil {
			return st, 0, bad
		}
		ttl := time.Duration(-1)
		if ms >= 0 {
			ttl = time.Duration(ms) * time.Millisecond
		}
		st.Holders = append(st.Holders, driver.Holder{Owner: r[i], Token: tok, TTL: ttl})
	}
	st.Held = len(st.Holders) > 0
	return st, floor, nil
}

func (v kindView) inspect(ctx context.Context, key string) (driver.LockState, error) {
	if err := check(ctx, key); err != nil {
		return driver.LockState{}, err
	}
	r, err := v.b.runStrings(ctx, kindInspectScript, v.call(key, false))
	if err != nil {
		return driver.LockState{}, err
	}
	st, _, err := v.parse(key, r)
	return st, err
}

func (v kindView) forceRelease(ctx context.Context, key string) (driver.LockState, error) {
	if err := check(ctx, key); err != nil {
		return driver.LockState{}, err
	}
	r, err := v.b.runStrings(ctx, kindInspectScript, v.call(key, true))
	if err != nil {
		return driver.LockState{}, err
	}
	st, floor, err := v.parse(key, r)
	st.Token = floor
	return st, err
}

// list scans for each of the kind's keys (P{prefix*}:suffix).
func (v kindView) list(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	base := globEscape(v.b.cfg.prefix+"{"+escapeKey(prefix)) + "*}"
	var patterns []string
	for _, s := range v.suffixes {
		patterns = append(patterns, base+globEscape(s.String()))
	}
	return v.b.listWith(ctx, prefix, limit, lister{
		script:   kindInspectScript,
		patterns: patterns,
		keyOf: func(rk string) (string, bool) {
			for _, s := range v.suffixes {
				if lk, ok := strings.CutSuffix(rk, s.String()); ok {
					if k, ok := v.b.lockKeyOf(lk); ok {
						return k, true
					}
				}
			}
			return "", false
		},
		call: func(k string) call { return v.call(k, false) },
		parse: func(k string, r []string) (driver.LockState, bool, error) {
			st, _, err := v.parse(k, r)
			return st, err == nil && st.Held, err
		},
	})
}

func (s *Semaphore) view() kindView {
	return kindView{s.b, "set", []rediskeys.Suffix{rediskeys.Semaphore}}
}

// Inspect implements driver.Inspector: every owner holding a permit, with
// its time left. A permit's own token is not kept: Holder.Token is 0, and
// LockState.Token is the key's last token.
func (s *Semaphore) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return s.view().inspect(ctx, key)
}

// List implements driver.Inspector with SCAN, as Backend.List does, for
// the semaphores' keys.
func (s *Semaphore) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return s.view().list(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: every permit of key goes
// at once, after the fence and the guard key are raised as
// Backend.ForceRelease raises them.
func (s *Semaphore) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return s.view().forceRelease(ctx, key)
}

func (rw *rwLock) view() kindView {
	return kindView{rw.b, "rw", []rediskeys.Suffix{rediskeys.Writer, rediskeys.Readers}}
}

// Inspect implements driver.Inspector: the writer (with the key's last
// token, its own) or the readers (Holder.Token 0: a read lock's token is
// not kept), with their time left. Both sides see the same state.
func (r *ReadLock) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return r.rw.view().inspect(ctx, key)
}

// List implements driver.Inspector with SCAN for the writers' and the
// readers' keys.
func (r *ReadLock) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return r.rw.view().list(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: the writer and every
// reader go at once, after the fence and the guard key are raised as
// Backend.ForceRelease raises them. Writers waiting keep their claims.
func (r *ReadLock) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return r.rw.view().forceRelease(ctx, key)
}

// Inspect implements driver.Inspector, as ReadLock.Inspect.
func (w *WriteLock) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return w.rw.view().inspect(ctx, key)
}

// List implements driver.Inspector, as ReadLock.List.
func (w *WriteLock) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return w.rw.view().list(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser, as ReadLock.ForceRelease.
func (w *WriteLock) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return w.rw.view().forceRelease(ctx, key)
}

func (r *Reentrant) view() kindView {
	return kindView{r.b, "reentrant", []rediskeys.Suffix{rediskeys.Reentrant}}
}

// Inspect implements driver.Inspector: the holder, the token of its first
// acquisition, and the time left.
func (r *Reentrant) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	return r.view().inspect(ctx, key)
}

// List implements driver.Inspector with SCAN for the reentrant locks'
// keys.
func (r *Reentrant) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	return r.view().list(ctx, prefix, limit)
}

// ForceRelease implements driver.ForceReleaser: the lock goes however
// often its holder entered it, after the fence and the guard key are
// raised as Backend.ForceRelease raises them.
func (r *Reentrant) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	return r.view().forceRelease(ctx, key)
}

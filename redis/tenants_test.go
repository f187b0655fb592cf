package redis_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// tenant is one application on a shared Redis: its ACL user, limited to
// its prefix, a Client, and a fence guard named as its backend names its
// keys.
type tenant struct {
	c     *turnstile.Client
	b     *redis.Backend
	guard *fence.Redis
}

// newTenant creates the ACL user name with the locking and operator
// recipes under prefix (no key pattern beyond it), and connects as it.
func newTenant(t *testing.T, ctx context.Context, srv *testserver.Redis, name, prefix string, opts ...fence.Option) tenant {
	t.Helper()
	srv.MustDo(t, append([]string{"ACL", "SETUSER", name, "reset"}, aclRules(prefix, aclLock, aclOperator)...)...)
	c, err := turnstile.Open(ctx, "redis://"+name+":"+aclPassword+"@"+srv.Addr()+"?prefix="+prefix, turnstile.WithTTL(20*time.Second))
	if err != nil {
		t.Fatalf("open as %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	b := c.Backend().(*redis.Backend)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, Username: name, Password: aclPassword, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis as %s: %v", name, err)
	}
	t.Cleanup(rc.Close)
	guard, err := fence.NewRedis(rc, append([]fence.Option{fence.WithKeysOf(b)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tenant{c: c, b: b, guard: guard}
}

// TestForcedUnlockStaysInItsTenant: three applications share one Redis,
// two under prefixes of their own with ACL users limited to them, one
// without a prefix; each locks "payments" and writes through its fence
// guard. The first's operator removes its lock by force: it raises the
// first's guard so that the removed holder is refused, and leaves every
// key outside the first's prefix as it was, so that the others' holders
// go on writing. An operator limited to the first's prefix too needs no
// other key: the server refuses it nothing.
func TestForcedUnlockStaysInItsTenant(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  func(t *testing.T, ctx context.Context, srv *testserver.Redis) *turnstile.Client
	}{
		{"operator limited to the prefix", func(t *testing.T, ctx context.Context, srv *testserver.Redis) *turnstile.Client {
			return newTenant(t, ctx, srv, "app-ops", "app:").c
		}},
		{"operator with every key", func(t *testing.T, ctx context.Context, srv *testserver.Redis) *turnstile.Client {
			c, err := turnstile.Open(ctx, srv.URL()+"?prefix=app:")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testserver.StartRedis(t)
			ctx := ctxFor(t, time.Minute)
			admin := rueidisClient(t, srv)
			const key = "payments"
			app := newTenant(t, ctx, srv, "app", "app:")
			others := []tenant{
				newTenant(t, ctx, srv, "other", "other:", fence.AllowSameToken()),
				newTenant(t, ctx, srv, "bare", "", fence.AllowSameToken()),
			}
			ops := tc.ops(t, ctx, srv)

			var held []*turnstile.Lease
			for _, o := range others {
				l, err := o.c.Acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = l.Release(ctx) }()
				if err := o.guard.Set(ctx, key, l.Token(), o.guard.DataKey(key, "ledger"), "1"); err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
			}
			la, err := app.c.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := app.guard.Set(ctx, key, la.Token(), app.guard.DataKey(key, "ledger"), "1"); err != nil {
				t.Fatal(err)
			}
			outside := keysOutside(t, ctx, admin, "app:")
			srv.MustDo(t, "ACL", "LOG", "RESET")

			st, err := ops.ForceRelease(ctx, key)
			if err != nil {
				t.Fatalf("the operator's forced unlock: %v", err)
			}
			if !st.Held || st.Holders[0].Owner != la.Owner() {
				t.Fatalf("ForceRelease removed %+v, want %s", st, la.Owner())
			}
			checkACLLog(t, srv)
			if after := keysOutside(t, ctx, admin, "app:"); !maps.Equal(after, outside) {
				t.Errorf("the forced unlock changed keys outside its prefix:\nbefore %q\nafter  %q", outside, after)
			}
			if last, err := app.guard.Last(ctx, key); err != nil || last < st.Token {
				t.Errorf("app's guard after the forced unlock = %d, %v; want at least the floor %d", last, err, st.Token)
			}
			if err := app.guard.Set(ctx, key, la.Token(), app.guard.DataKey(key, "ledger"), "late"); !errors.Is(err, fence.ErrStaleToken) {
				t.Errorf("app's removed holder's late write = %v, want ErrStaleToken", err)
			}
			for i, o := range others {
				l := held[i]
				if s, err := o.c.Inspect(ctx, key); err != nil || !s.Held || s.Holders[0].Owner != l.Owner() {
					t.Errorf("%s's lock after app's forced unlock = %+v, %v; want held by %s", o.b.Name(), s, err, l.Owner())
				}
				if err := o.guard.Set(ctx, key, l.Token(), o.guard.DataKey(key, "ledger"), "2"); err != nil {
					t.Errorf("the write of the holder under prefix %q after app's forced unlock: %v", o.b.KeyPrefix(), err)
				}
			}
		})
	}
}

// keysOutside returns every key of the database that does not begin with
// prefix, with its serialized value (DUMP) and whether it expires.
func keysOutside(t *testing.T, ctx context.Context, c rueidis.Client, prefix string) map[string]string {
	t.Helper()
	keys, err := c.Do(ctx, c.B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			continue
		}
		v, err := c.Do(ctx, c.B().Dump().Key(k).Build()).ToString()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		ttl, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatalf("PTTL %s: %v", k, err)
		}
		out[k] = v
		if ttl < 0 {
			out[k] += " without expiry"
		}
	}
	return out
}

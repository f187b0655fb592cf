package redis_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/redis"
)

// operator is what the lock kinds offer operators.
type operator interface {
	driver.Backend
	driver.Inspector
	driver.ForceReleaser
}

// TestKindsInspect: the semaphore, read-write and reentrant views report
// every holder, list their keys, and remove a lock by force so that
// every holder is refused and the next token passes the raised fence and
// guard.
func TestKindsInspect(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv, redis.WithPrefix("kinds:"))
	sem := semaphoreOf(t, b, 3)
	read, write := readWriteOf(t, b)
	const ttl = 20 * time.Second
	for _, tc := range []struct {
		name    string
		take    operator // takes the lock for each of owners
		owners  []string
		inspect operator // inspects and removes it
		perHold bool     // holders keep their own tokens
	}{
		{"semaphore", sem, []string{"p1", "p2"}, sem, false},
		{"read", read, []string{"r1", "r2", "r3"}, write, false},
		{"write", write, []string{"w1"}, read, true},
		{"reentrant", reentrantOf(t, b), []string{"re", "re"}, reentrantOf(t, b), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "op:" + tc.name
			var tokens []uint64
			for _, o := range tc.owners {
				tok, ok, err := tc.take.Acquire(ctx, key, o, ttl)
				if err != nil || !ok {
					t.Fatalf("Acquire for %s: %v %v", o, ok, err)
				}
				tokens = append(tokens, tok)
			}
			owners := slices.Compact(slices.Clone(tc.owners))
			st, err := tc.inspect.Inspect(ctx, key)
			if err != nil || !st.Held || len(st.Holders) != len(owners) {
				t.Fatalf("Inspect = %+v, %v; want %d holders", st, err, len(owners))
			}
			var got []string
			for _, h := range st.Holders {
				got = append(got, h.Owner)
				if h.TTL <= 0 || h.TTL > ttl {
					t.Errorf("holder %s: TTL %v, want in (0, %v]", h.Owner, h.TTL, ttl)
				}
				if tc.perHold && h.Token != tokens[0] {
					t.Errorf("holder %s: token %d, want %d", h.Owner, h.Token, tokens[0])
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, owners) {
				t.Errorf("holders %q, want %q", got, owners)
			}
			if st.Token != slices.Max(tokens) {
				t.Errorf("last token %d, want %d", st.Token, slices.Max(tokens))
			}
			states, more, err := tc.inspect.List(ctx, "op:"+tc.name[:2], 10)
			if err != nil || len(states) != 1 || states[0].Key != key || more {
				t.Errorf("List = %+v more=%v %v; want %s only", states, more, err, key)
			}

			// The guard key lies under the backend's prefix.
			guard := "kinds:{" + key + "}:guard"
			if b.GuardKey(key) != guard {
				t.Fatalf("GuardKey(%q) = %q, want %q", key, b.GuardKey(key), guard)
			}
			srv.MustDo(t, "SET", guard, "1")
			removed, err := tc.inspect.ForceRelease(ctx, key)
			if err != nil || !removed.Held || len(removed.Holders) != len(owners) {
				t.Fatalf("ForceRelease = %+v, %v", removed, err)
			}
			// The multiple of the token room above the last token.
			floor := slices.Max(tokens) - slices.Max(tokens)%b.TokenRoom() + b.TokenRoom()
			if removed.Token != floor || srv.MustDo(t, "GET", guard) != strconv.FormatUint(floor, 10) {
				t.Errorf("fence floor %d, guard %s; want both %d", removed.Token, srv.MustDo(t, "GET", guard), floor)
			}
			for _, o := range owners {
				if ok, err := tc.take.Extend(ctx, key, o, ttl); ok || err != nil {
					t.Errorf("%s's Extend after ForceRelease = %v, %v; want refused", o, ok, err)
				}
			}
			if st, err := tc.inspect.Inspect(ctx, key); err != nil || st.Held {
				t.Errorf("Inspect after ForceRelease = %+v, %v", st, err)
			}
			next, ok, err := tc.take.Acquire(ctx, key, "next", ttl)
			if err != nil || !ok || next <= floor {
				t.Errorf("next Acquire = %d %v %v; want a token above %d", next, ok, err, floor)
			}
			if st, err := tc.inspect.ForceRelease(ctx, key); err != nil || !st.Held {
				t.Errorf("second ForceRelease = %+v, %v", st, err)
			}
			if st, err := tc.inspect.ForceRelease(ctx, key); err != nil || st.Held {
				t.Errorf("ForceRelease of a free key = %+v, %v", st, err)
			}
		})
	}
}

// TestSemaphoreHoldersLoseLeases: a Client over the semaphore view sees
// its permits' holders, and after a forced release each holder's lease
// is lost at its next renewal.
func TestSemaphoreHoldersLoseLeases(t *testing.T) {
	srv, ctx := startRedis(t)
	sem := semaphoreOf(t, dial(t, srv), 2)
	c := newClient(t, sem, turnstile.WithTTL(time.Second))
	a, err := c.Acquire(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	bl, err := c.Acquire(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.ForceRelease(ctx, "jobs")
	if err != nil || len(st.Holders) != 2 {
		t.Fatalf("ForceRelease = %+v, %v", st, err)
	}
	for _, l := range []*turnstile.Lease{a, bl} {
		select {
		case <-l.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("lease %s not lost after the forced release", l.Owner())
		}
		if err := context.Cause(l.Context()); !errors.Is(err, turnstile.ErrLockLost) {
			t.Errorf("cause %v, want ErrLockLost", err)
		}
	}
}

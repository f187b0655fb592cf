package redis_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/handofftest"
)

// TestForceReleaseShutsOutHandedHolder: a Client hands a lock to its own
// waiters without the store (tokens T, T+1, T+2 under the store's T). An
// operator's forced release in the middle of the run must shut out the
// lease holding it then, whose token the store never saw: its late
// fenced write is refused, as is every token the run could have reached
// (up to T+15), in both guard modes, while the next holder's writes pass.
func TestForceReleaseShutsOutHandedHolder(t *testing.T) {
	srv, b := startDialled(t)
	for _, mode := range []struct {
		name string
		opts []fence.Option
	}{
		{"strict", nil},
		{"AllowSameToken", []fence.Option{fence.AllowSameToken()}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			guard, err := fence.NewRedis(rueidisClient(t, srv), mode.opts...)
			if err != nil {
				t.Fatal(err)
			}
			checkForcedRun(t, b, b, guard, "forced:"+mode.name)
		})
	}
}

// checkForcedRun runs the forced release of a run of handoffs on key:
// the Client takes key through b, op removes it by force, guard is the
// fenced storage whose guard key op raises.
func checkForcedRun(t *testing.T, b driver.Backend, op driver.ForceReleaser, guard *fence.Redis, key string) {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	room := b.(driver.TokenRoom).TokenRoom()
	data := fence.DataKey(key, "report")
	c, waiting := handofftest.WaitingClient(t, b)
	run := handofftest.HandedRun(t, ctx, c, waiting, key, 3, func(l *turnstile.Lease) {
		if err := guard.Set(ctx, key, l.Token(), data, fmt.Sprint("section ", l.Token())); err != nil {
			t.Fatalf("fenced write of the lease with token %d: %v", l.Token(), err)
		}
	})
	held := run[len(run)-1]
	base := run[0].Token()

	st, err := op.ForceRelease(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != held.Owner() || st.Holders[0].Token != base {
		t.Fatalf("ForceRelease removed %+v; want %s with the store's token %d", st, held.Owner(), base)
	}
	last := base - base%room + room - 1 // the last token a run from base can carry
	if st.Token < last {
		t.Errorf("fence floor %d, below the token %d a run of handoffs from %d can reach (the holder's is %d)", st.Token, last, base, held.Token())
	}
	for _, tok := range []uint64{held.Token(), last} {
		var stale *fence.StaleTokenError
		if err := guard.Set(ctx, key, tok, data, "late write"); !errors.As(err, &stale) {
			t.Errorf("late fenced write with token %d after the forced release = %v, want a stale token error", tok, err)
		}
	}

	next, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = next.Release(ctx) }()
	if next.Token() <= st.Token {
		t.Errorf("next token %d, want above the fence floor %d", next.Token(), st.Token)
	}
	if err := guard.Set(ctx, key, next.Token(), data, "next holder"); err != nil {
		t.Errorf("the next holder's fenced write: %v", err)
	}
	if err := guard.Set(ctx, key, held.Token(), data, "late write"); !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("late fenced write with token %d after the next holder's = %v, want ErrStaleToken", held.Token(), err)
	}
}

package turnstile_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/memory"
)

// TestRandomized runs the randomized, fault-injecting checker of the
// Client (locktest.RunRandom) on the memory backend, with tokens that
// leave room for handoffs without the store (driver.TokenRoom, as
// Redis's) and without. TURNSTILE_RANDOM_SEED, TURNSTILE_RANDOM_DURATION
// and TURNSTILE_RANDOM_SCENARIO steer it (see RunRandom); a failure
// prints the command that reruns its seed.
func TestRandomized(t *testing.T) {
	for _, tc := range randomHarnesses() {
		t.Run(tc.name, func(t *testing.T) { locktest.RunRandom(t, tc.h) })
	}
}

type randomHarness struct {
	name string
	h    locktest.RandomHarness
}

func randomHarnesses() []randomHarness {
	return []randomHarness{
		{"room", locktest.RandomHarness{New: storePerTest(func() driver.Backend { return newRoomMemory() }), Budget: 2 * time.Second}},
		{"plain", locktest.RandomHarness{New: storePerTest(func() driver.Backend { return memory.New() }), Budget: 700 * time.Millisecond}},
	}
}

// storePerTest returns a harness's New: one store per test, every Client
// of it on that store.
func storePerTest(fresh func() driver.Backend) func(testing.TB) driver.Backend {
	stores := make(map[testing.TB]driver.Backend)
	return func(t testing.TB) driver.Backend {
		b, ok := stores[t]
		if !ok {
			b = fresh()
			stores[t] = b
			t.Cleanup(func() { delete(stores, t) })
		}
		return b
	}
}

// roomMemory is the memory backend with tokens that leave room between
// grants (driver.TokenRoom) in every answer, as Redis's: grants, Inspect,
// List and ForceRelease, whose floor is one above the removed holder's
// token as Redis's script makes it.
type roomMemory struct{ *memory.Backend }

func newRoomMemory() *roomMemory { return &roomMemory{memory.New()} }

func (r *roomMemory) Name() string      { return "room memory" }
func (r *roomMemory) TokenRoom() uint64 { return storeRoom }

func (r *roomMemory) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	tok, ok, err := r.Backend.Acquire(ctx, key, owner, ttl)
	return tok * 2 * storeRoom, ok, err
}

func scaled(st driver.LockState) driver.LockState {
	st.Token *= 2 * storeRoom
	hs := make([]driver.Holder, len(st.Holders))
	for i, h := range st.Holders {
		h.Token *= 2 * storeRoom
		hs[i] = h
	}
	st.Holders = hs
	return st
}

func (r *roomMemory) Inspect(ctx context.Context, key string) (driver.LockState, error) {
	st, err := r.Backend.Inspect(ctx, key)
	return scaled(st), err
}

func (r *roomMemory) List(ctx context.Context, prefix string, limit int) ([]driver.LockState, bool, error) {
	states, more, err := r.Backend.List(ctx, prefix, limit)
	for i := range states {
		states[i] = scaled(states[i])
	}
	return states, more, err
}

func (r *roomMemory) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	st, err := r.Backend.ForceRelease(ctx, key)
	if err != nil {
		return st, err
	}
	st = scaled(st)
	if st.Held && len(st.Holders) > 0 {
		t := st.Holders[0].Token
		st.Token = t - t%storeRoom + storeRoom
	}
	return st, nil
}

func (r *roomMemory) RaiseFence(ctx context.Context, key, owner string, token uint64) (bool, error) {
	return r.Backend.RaiseFence(ctx, key, owner, (token+2*storeRoom-1)/(2*storeRoom))
}

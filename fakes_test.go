package turnstile_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

// refuseCalls is a backend that fails the test on any round trip, for
// checking that bad input is rejected before reaching the store.
type refuseCalls struct{ t *testing.T }

func (r refuseCalls) Acquire(context.Context, string, string, time.Duration) (uint64, bool, error) {
	r.t.Error("unexpected Acquire round trip")
	return 0, false, nil
}
func (r refuseCalls) Extend(context.Context, string, string, time.Duration) (bool, error) {
	r.t.Error("unexpected Extend round trip")
	return false, nil
}
func (r refuseCalls) Release(context.Context, string, string) (bool, error) {
	r.t.Error("unexpected Release round trip")
	return false, nil
}

// flaky wraps the memory backend and injects faults through the same
// interface the Client uses.
type flaky struct {
	*memory.Backend
	acquireErr  func() error          // after taking the lock, report this error (a lost reply)
	extendHook  func(context.Context) // runs before each Extend; may block
	extendFails atomic.Int32          // the next n Extends fail with errFlaky
	batches     atomic.Int32
	batchSizes  sync.Map // size -> count
	extends     atomic.Int32
	releaseGate chan struct{} // if set, Release waits for it to close
	releases    atomic.Int32  // completed Release calls
}

type errString string

func (e errString) Error() string { return string(e) }

const errFlaky = errString("flaky: connection reset")

func newFlaky() *flaky { return &flaky{Backend: memory.New()} }

func (f *flaky) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	tok, ok, err := f.Backend.Acquire(ctx, key, owner, ttl)
	if f.acquireErr != nil && err == nil {
		if e := f.acquireErr(); e != nil {
			return 0, false, e
		}
	}
	return tok, ok, err
}

func (f *flaky) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	f.extends.Add(1)
	if f.extendHook != nil {
		f.extendHook(ctx)
	}
	if f.extendFails.Add(-1) >= 0 {
		return false, errFlaky
	}
	return f.Backend.Extend(ctx, key, owner, ttl)
}

func (f *flaky) Release(ctx context.Context, key, owner string) (bool, error) {
	if f.releaseGate != nil {
		<-f.releaseGate
	}
	defer f.releases.Add(1)
	return f.Backend.Release(ctx, key, owner)
}

func (f *flaky) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	f.batches.Add(1)
	v, _ := f.batchSizes.LoadOrStore(len(reqs), new(atomic.Int32))
	v.(*atomic.Int32).Add(1)
	res := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		res[i].OK, res[i].Err = f.Extend(ctx, r.Key, r.Owner, r.TTL)
	}
	return res
}

// plain hides the optional capabilities of a backend.
type plain struct{ driver.Backend }

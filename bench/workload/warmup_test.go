package workload_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// flaky is a Locker whose releases fail the first failures times.
type flaky struct {
	mu       sync.Mutex
	failures int
	releases int
}

func (f *flaky) Acquire(context.Context, string) (workload.Held, error) { return f, nil }
func (f *flaky) Close() error                                           { return nil }

func (f *flaky) Release(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases++
	if f.failures > 0 {
		f.failures--
		return errors.New("no answer within the node timeout")
	}
	return nil
}

// TestWarmUpOutlastsAFailure: a release that fails once (a node timeout
// on a busy machine) does not fail the workload's warm-up; a store that
// fails every attempt does.
func TestWarmUpOutlastsAFailure(t *testing.T) {
	f := &flaky{failures: 1}
	if err := workload.WarmUp(context.Background(), f, "p:", 1); err != nil {
		t.Fatalf("one failed release: %v", err)
	}
	if f.releases != 3 {
		t.Fatalf("%d releases, want 3 (two pairs, one tried again)", f.releases)
	}
	f = &flaky{failures: 1 << 30}
	if err := workload.WarmUp(context.Background(), f, "p:", 2); err == nil || f.releases != 6 {
		t.Fatalf("every release failing: err %v after %d releases, want an error after 6 (3 attempts by each of 2 workers)", err, f.releases)
	}
}

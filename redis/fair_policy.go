package redis

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile"
)

// DefaultRetryThreshold is the mean retry count per acquisition above
// which a Fair lock with WithRetryFirst queues its callers instead of
// letting them retry (SPEC S-6.3).
const DefaultRetryThreshold = 5

// WithRetryFirst sets the fair lock's waiting policy to "retry first,
// queue under contention" (SPEC S-6.3). While the mean retry count of a
// key's recent acquisitions stays at or below threshold, AcquireWait
// retries like the plain lock — exponential backoff with full jitter
// (10 ms base, 1 s cap) and at once on a release notice — but never ahead
// of the queue: a retry takes the lock only when nobody queues for it. A
// caller that has retried more than threshold times joins the queue. Once
// the mean exceeds threshold, callers queue at once, and each learns its
// place. Every acquisition adds its retries to the mean — for a queued
// one, the retries before it queued plus the waiters ahead of it when it
// joined — so the mean falls again when contention does.
//
// The mean is a moving average over about the last ten acquisitions of
// the key through this Fair value, kept in this process (in 1,024 slots
// by hash of the key, so memory stays bounded however many keys are
// used; keys that share a slot share a mean). threshold must lie in
// [1, 100]; DefaultRetryThreshold (5) is the SPEC's. Without this option
// every caller queues.
func WithRetryFirst(threshold float64) FairOption {
	return func(f *Fair) error {
		if !(threshold >= 1 && threshold <= 100) {
			return fmt.Errorf("%w: retry threshold %v is outside [1, 100]", turnstile.ErrInvalidOption, threshold)
		}
		f.threshold = threshold
		f.stats = newRetryStats()
		return nil
	}
}

// MeanRetries returns the moving mean of retries per acquisition of key
// that WithRetryFirst decides by, or 0 without that option.
func (f *Fair) MeanRetries(key string) float64 {
	if f.stats == nil {
		return 0
	}
	return f.stats.mean(key)
}

// retryFirst retries the lock without queueing. It returns the token, or
// how many retries it made before giving up to the queue.
func (f *Fair) retryFirst(ctx context.Context, key, owner string, ttl time.Duration, notices <-chan struct{}) (uint64, int, error) {
	limit := int(f.threshold)
	backoff := turnstile.Exponential{Base: turnstile.DefaultBackoffBase, Cap: turnstile.DefaultBackoffCap, MaxRetries: -1}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for retries := 0; ; retries++ {
		n, err := f.attempt(ctx, key, owner, ttl, false)
		if err != nil {
			f.leave(key, owner, true) // the lock may have been granted
			if cerr := ctx.Err(); cerr != nil {
				return 0, 0, errors.Join(cerr, err)
			}
			return 0, 0, err
		}
		if n > 0 {
			f.stats.add(key, retries)
			return uint64(n), 0, nil
		}
		if retries >= limit {
			return 0, retries + 1, nil
		}
		d, _ := backoff.Delay(retries)
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-timer.C:
		case <-notices:
			timer.Stop()
		}
	}
}

// retryStats are moving means of retries per acquisition, in slots by
// hash of the key.
type retryStats struct {
	seed  maphash.Seed
	slots [1024]atomic.Uint64 // float64 bits
}

func newRetryStats() *retryStats { return &retryStats{seed: maphash.MakeSeed()} }

func (s *retryStats) slot(key string) *atomic.Uint64 {
	return &s.slots[maphash.String(s.seed, key)%uint64(len(s.slots))]
}

func (s *retryStats) mean(key string) float64 {
	return math.Float64frombits(s.slot(key).Load())
}

// add folds one acquisition's retries into the key's mean, weighted so
// that the mean follows about the last ten.
func (s *retryStats) add(key string, retries int) {
	p := s.slot(key)
	for {
		old := p.Load()
		m := math.Float64frombits(old)
		m += (float64(retries) - m) / 10
		if p.CompareAndSwap(old, math.Float64bits(m)) {
			return
		}
	}
}

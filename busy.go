package turnstile

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"sync/atomic"
	"time"
)

// Retry first, queue when busy (WithQueueWhenBusy).
//
// Retrying is cheapest while a lock is rarely contended: a waiter takes a
// free lock in one round trip and no queue is kept. Under heavy
// contention retries pile up, every release sets off a race, and a
// store's first-come-first-served queue (a driver.Queuer) serves the
// waiters better: one wakes per release, in arrival order, and each can
// be told its place. The policy switches by the moving mean of retries
// per acquisition, kept per key:
//
//   - mean ≤ threshold: Acquire retries with the Client's Backoff (and
//     notices, and the local line). A caller that has retried more than
//     threshold times stops retrying and joins the queue.
//   - mean > threshold: Acquire joins the queue at once.
//
// Every waiting acquisition adds to its key's mean: one that retried, its
// retries; one that queued, the attempts it made before plus the Backoff
// rounds that fit in its wait in the queue — the retries it would have
// made instead. So the mean rises with contention and falls again when
// contention does, for every store's queue alike.
//
// The means live in a fixed table of busySlots, by hash of the key, so
// memory stays bounded however many keys are used; keys that share a
// slot share a mean.

// busySlots is the size of a Client's table of means.
const busySlots = 1024

// busyAlpha weighs the newest acquisition in a mean: it follows about the
// last ten acquisitions of the key.
const busyAlpha = 0.1

// errQueueNow ends a contender's retries: it has retried more than the
// busy threshold and joins the store's queue instead. It never reaches
// the caller.
var errQueueNow = errors.New("turnstile: retried more than the busy threshold")

// busyMeter holds the moving means of retries per acquisition.
type busyMeter struct {
	seed  maphash.Seed
	slots [busySlots]atomic.Uint64 // float64 bits
}

func newBusyMeter() *busyMeter { return &busyMeter{seed: maphash.MakeSeed()} }

func (b *busyMeter) slot(key string) *atomic.Uint64 {
	return &b.slots[maphash.String(b.seed, key)%busySlots]
}

// mean is key's moving mean of retries per acquisition.
func (b *busyMeter) mean(key string) float64 {
	return math.Float64frombits(b.slot(key).Load())
}

// add folds one acquisition's retries into key's mean.
func (b *busyMeter) add(key string, retries int) {
	p := b.slot(key)
	for {
		old := p.Load()
		m := math.Float64frombits(old)
		m += busyAlpha * (float64(retries) - m)
		if p.CompareAndSwap(old, math.Float64bits(m)) {
			return
		}
	}
}

// retryThenQueue is Acquire's wait under WithQueueWhenBusy. It returns
// the lease, the retries it made before it took the lock or queued, and
// whether it waited.
func (c *Client) retryThenQueue(ctx context.Context, key string, cfg *config) (*Lease, int, bool, error) {
	if c.busy.mean(key) > cfg.busyAt {
		c.emit(cfg, Event{Type: EventWaiting, Key: key})
		l, err := c.queueCounted(ctx, key, cfg, 0)
		return l, 0, true, err
	}
	k := &contender{c: c, key: key, cfg: cfg, owner: newOwner(cfg), queueAfter: int(math.Ceil(cfg.busyAt))}
	l, err := c.waitFor(ctx, k)
	if !errors.Is(err, errQueueNow) {
		if l != nil || errors.Is(err, ErrNotAcquired) {
			c.busy.add(key, k.retries())
		}
		return l, k.retries(), k.waited, err
	}
	l, err = c.queueCounted(ctx, key, cfg, k.tries)
	return l, k.retries(), true, err
}

// queueCounted waits in the busy queue after tries attempts, and adds
// what the acquisition cost to the key's mean.
func (c *Client) queueCounted(ctx context.Context, key string, cfg *config, tries int) (*Lease, error) {
	start := now()
	l, err := c.acquireQueued(ctx, cfg.busyQueue, key, cfg)
	if err == nil {
		c.busy.add(key, tries+roundsIn(cfg.backoff, time.Duration(now()-start)))
	}
	return l, err
}

// maxRoundsIn bounds roundsIn.
const maxRoundsIn = 1000

// roundsIn is how many rounds of b fit in d: the retries that a caller
// who waited d in a queue would have made instead.
func roundsIn(b Backoff, d time.Duration) int {
	var total time.Duration
	for n := range maxRoundsIn {
		delay, more := b.Delay(n)
		total += delay
		if !more || total > d {
			return n
		}
	}
	return maxRoundsIn
}

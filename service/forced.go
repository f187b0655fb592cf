package service

import (
	"context"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
)

// A lease removed by force learns it at its next renewal, up to a third
// of its TTL later. A held stream's client should know sooner: an
// operator who removes a stuck lock expects its holder to stop at once.
// So the instance keeps its held streams' leases by key, and a forced
// release through it renews each of that key's leases right away: the
// store refuses the renewal of the removed one, which is then lost, and
// its stream says Lost. Streams held through other instances still learn
// it at their next renewal.

// heldLease is a held stream's lease and the TTL it is renewed for.
type heldLease struct {
	lease *turnstile.Lease
	ttl   time.Duration
}

// heldLeases are the leases of this instance's held streams, by key.
type heldLeases struct {
	mu    sync.Mutex
	byKey map[string]map[*turnstile.Lease]time.Duration
}

func newHeldLeases() *heldLeases {
	return &heldLeases{byKey: map[string]map[*turnstile.Lease]time.Duration{}}
}

// add records l until the returned function is called.
func (h *heldLeases) add(l *turnstile.Lease, ttl time.Duration) (remove func()) {
	key := l.Key()
	h.mu.Lock()
	set := h.byKey[key]
	if set == nil {
		set = map[*turnstile.Lease]time.Duration{}
		h.byKey[key] = set
	}
	set[l] = ttl
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.byKey[key], l)
		if len(h.byKey[key]) == 0 {
			delete(h.byKey, key)
		}
	}
}

// of returns key's leases.
func (h *heldLeases) of(key string) []heldLease {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]heldLease, 0, len(h.byKey[key]))
	for l, ttl := range h.byKey[key] {
		out = append(out, heldLease{lease: l, ttl: ttl})
	}
	return out
}

// recheck renews key's held leases at once, after a forced release of
// key: the removed ones are refused, lost, and their streams told.
// Errors are the leases' own: a lease the store refuses is lost, and
// one it could not reach is renewed again by the watchdog.
func (h *heldLeases) recheck(ctx context.Context, key string) {
	var wg sync.WaitGroup
	for _, hl := range h.of(key) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = hl.lease.Extend(ctx, hl.ttl)
		}()
	}
	wg.Wait()
}

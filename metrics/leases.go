package metrics

import (
	"hash/maphash"
	"sync"
)

// heldShards spreads the held leases over this many locks, so that
// observers on many goroutines rarely wait for each other.
const heldShards = 64

// heldSet is the owner ids of the leases counted as held. A Client may
// report a lease's end twice — Release after the lease was lost, or
// Release again after a store error — and the leases_held gauge must go
// down once: only the first end of an owner id held here counts. Owner ids
// are unique per lease (128 random bits). Entries are the event's own
// strings, and a map that stays the same size reuses its slots, so a
// steady flow of acquisitions and releases does not allocate.
type heldSet struct {
	seed   maphash.Seed
	shards [heldShards]heldShard
}

type heldShard struct {
	mu sync.Mutex
	m  map[string]struct{}
	_  [40]byte // keep neighbouring shards' locks on separate cache lines
}

func (h *heldSet) init() {
	h.seed = maphash.MakeSeed()
	for i := range h.shards {
		h.shards[i].m = make(map[string]struct{})
	}
}

func (h *heldSet) shard(owner string) *heldShard {
	return &h.shards[maphash.String(h.seed, owner)%heldShards]
}

// add records owner as held; false if it was already (or owner is empty).
func (h *heldSet) add(owner string) bool {
	if owner == "" {
		return false
	}
	s := h.shard(owner)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[owner]; ok {
		return false
	}
	s.m[owner] = struct{}{}
	return true
}

// remove forgets owner; false if it was not held.
func (h *heldSet) remove(owner string) bool {
	if owner == "" {
		return false
	}
	s := h.shard(owner)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[owner]; !ok {
		return false
	}
	delete(s.m, owner)
	return true
}

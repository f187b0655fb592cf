package fallback

import (
	"sync"
	"time"
)

// leases remembers, per key and owner, which store granted a lease and in
// which epoch, so that Extend and Release go to that store. Entries leave
// on release, on a refused renewal, or lazily once expired.
type leases struct {
	mu      sync.Mutex
	m       map[leaseID]lease
	pruneAt int
}

type leaseID struct{ key, owner string }

type lease struct {
	store   store
	epoch   uint64
	expires time.Time
}

const minPrune = 1024

func (l *leases) put(key, owner string, v lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[leaseID]lease)
		l.pruneAt = minPrune
	}
	l.m[leaseID{key, owner}] = v
	if len(l.m) >= l.pruneAt {
		now := time.Now()
		for id, v := range l.m {
			if now.After(v.expires) {
				delete(l.m, id)
			}
		}
		l.pruneAt = max(minPrune, 2*len(l.m))
	}
}

func (l *leases) get(key, owner string) (lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[leaseID{key, owner}]
	return v, ok
}

func (l *leases) take(key, owner string) (lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := leaseID{key, owner}
	v, ok := l.m[id]
	delete(l.m, id)
	return v, ok
}

// len is the number of remembered leases, for tests.
func (l *leases) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

package locktest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The randomized checker's oracle: what the store granted and removed,
// what each lease believes, and a model of fenced storage.
//
// A lease counts as a holder from when its Acquire (or Campaign)
// returned until its worker calls Release on it. A holder is valid while
// its own clock says so (Validity() > 0 and its Context not done) and
// the store has not removed its grant behind its back (an eviction or a
// ForceRelease, which the faulty store reports here under the oracle's
// lock, so that no later grant meets the removed lease before the oracle
// knows). A lease handed over without the store (driver.TokenRoom)
// belongs to the grant its token rounds down to.

// rec is one lease as the oracle tracks it.
type rec struct {
	id     int
	what   string // the call that returned it, for messages
	client int
	key    string
	l      *turnstile.Lease
	token  uint64
	owner  string
	since  time.Time
	wrote  bool // its first write went to the real fence
}

func (r *rec) String() string {
	return fmt.Sprintf("lease #%d (%s on client %d, token %d, owner %s)", r.id, r.what, r.client, r.token, r.owner)
}

// ownOK reports whether r's own clock says it holds the lock.
func (r *rec) ownOK() bool { return r.l.Validity() > 0 && r.l.Context().Err() == nil }

type grant struct {
	owner string
	token uint64 // the store's token of the grant
}

type keyState struct {
	held    map[*rec]struct{}
	removed map[grant]bool
	// The model fence: a write is accepted when its token is above the
	// floor (ForceRelease's) and above the last accepted token, or
	// equal to it from the lease that wrote it.
	last   uint64
	lastBy *rec
	floor  uint64
	// realWritten: the store's fenced storage accepted a write for the
	// key, so it has a guard for ForceRelease to raise (fence.Redis's
	// guard key exists only once written to).
	realWritten bool
}

type oracle struct {
	w    *world
	room uint64

	mu   sync.Mutex
	keys map[string]*keyState
	ids  int
}

func newOracle(w *world, room uint64) *oracle {
	return &oracle{w: w, room: max(room, 1), keys: make(map[string]*keyState)}
}

func (o *oracle) key(k string) *keyState {
	ks := o.keys[k]
	if ks == nil {
		ks = &keyState{held: make(map[*rec]struct{}), removed: make(map[grant]bool)}
		o.keys[k] = ks
	}
	return ks
}

func (o *oracle) grantOf(token uint64) uint64 { return token - token%o.room }

// removedLocked reports whether the store removed r's grant.
func (o *oracle) removedLocked(r *rec) bool {
	return o.key(r.key).removed[grant{r.owner, o.grantOf(r.token)}]
}

func (o *oracle) validLocked(r *rec) bool { return r.ownOK() && !o.removedLocked(r) }

// hold records a lease its call just returned, and checks it.
func (o *oracle) hold(client int, what string, l *turnstile.Lease) *rec {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ids++
	r := &rec{id: o.ids, what: what, client: client, key: l.Key(), l: l, token: l.Token(), owner: l.Owner(), since: time.Now()}
	o.key(r.key).held[r] = struct{}{}
	o.w.stats.leases.Add(1)
	if r.token%o.room != 0 {
		o.w.stats.handed.Add(1)
	}
	o.exclusiveLocked(r, "was granted")
	return r
}

// exclusiveLocked fails the run if r and another holder of its key are
// both valid.
func (o *oracle) exclusiveLocked(r *rec, when string) {
	if !o.validLocked(r) {
		return
	}
	for x := range o.key(r.key).held {
		if x != r && o.validLocked(x) && o.validLocked(r) {
			o.w.fail("two holders of %q: %s %s while %s (since %v) was valid too: %v and %v left by their own clocks, neither removed from the store",
				r.key, r, when, x, time.Since(x.since).Round(time.Millisecond), r.l.Validity(), x.l.Validity())
			return
		}
	}
}

// letGo: r's worker is about to release it; it holds no more.
func (o *oracle) letGo(r *rec) {
	o.mu.Lock()
	delete(o.key(r.key).held, r)
	o.mu.Unlock()
}

// write is one step of r's critical section: a write to fenced storage
// with r's token, checked before and after against r's validity.
func (o *oracle) write(ctx context.Context, r *rec) {
	o.mu.Lock()
	if !o.validLocked(r) {
		o.mu.Unlock()
		return
	}
	o.exclusiveLocked(r, "wrote")
	ks := o.key(r.key)
	accepted := r.token > ks.floor && (r.token > ks.last || r.token == ks.last && ks.lastBy == r)
	if accepted {
		ks.last, ks.lastBy = r.token, r
	}
	o.w.stats.writes.Add(1)
	last, floor := ks.last, ks.floor
	o.mu.Unlock()

	real, realErr := true, error(nil)
	if f := o.w.fence; f != nil && !r.wrote {
		real, realErr = f.Write(ctx, r.key, r.token)
		r.wrote = realErr == nil
	}
	o.mu.Lock()
	if realErr == nil && real && o.w.fence != nil {
		ks.realWritten = true
	}
	o.mu.Unlock()
	o.storeOutlives(ctx, r)
	o.mu.Lock()
	still := o.validLocked(r)
	o.mu.Unlock()
	switch {
	case !still:
	case !accepted:
		o.w.fail("tokens out of order on %q: %s, valid before and after its write, was refused by the fence: last accepted token %d, ForceRelease floor %d",
			r.key, r, last, floor)
	case realErr == nil && !real:
		o.w.fail("tokens out of order on %q: %s, valid before and after its write, was refused by the store's fenced storage", r.key, r)
	}
}

// ttlSlack allows for the store's rounding of the time left (Redis's
// PTTL: milliseconds).
const ttlSlack = 25 * time.Millisecond

// storeOutlives fails the run if the store will let r's lock expire
// before r's own clock says it ends: the lock would be free, and taken,
// while r still holds it. r's validity only falls with time between its
// renewals, which raise it: read before the store is asked, less the
// time the asking took, it is at most what it was when the store
// answered.
func (o *oracle) storeOutlives(ctx context.Context, r *rec) {
	in, ok := o.w.bases[0].(driver.Inspector)
	if !ok {
		return
	}
	t0 := time.Now()
	v := r.l.Validity()
	st, err := in.Inspect(ctx, r.key)
	v -= time.Since(t0)
	if err != nil || !st.Held || len(st.Holders) == 0 {
		return
	}
	h := st.Holders[0]
	if h.Owner != r.owner || h.TTL < 0 || h.Token != 0 && o.grantOf(h.Token) != o.grantOf(r.token) {
		return // another grant's lock: the exclusion check's business
	}
	o.mu.Lock()
	removed := o.removedLocked(r)
	o.mu.Unlock()
	if !removed && r.l.Context().Err() == nil && v > h.TTL+ttlSlack {
		o.w.fail("%s is valid for %v more by its own clock, but the store lets its lock expire in %v: the lock will be free while the lease holds it",
			r, v.Round(time.Millisecond), h.TTL.Round(time.Millisecond))
	}
}

// removal collects the holders a ForceRelease removed in the store.
type removal struct {
	recs []*rec
	// guarded: the store's fenced storage had accepted a write for the
	// key before the removal.
	guarded bool
}

type removalKey struct{}

// withRemoval returns ctx carrying rm, which the faulty store fills when
// a ForceRelease made with ctx removes a lock.
func withRemoval(ctx context.Context, rm *removal) context.Context {
	return context.WithValue(ctx, removalKey{}, rm)
}

func removedBy(ctx context.Context) *removal {
	rm, _ := ctx.Value(removalKey{}).(*removal)
	return rm
}

// remove runs act, a removal of key's lock in the store (ForceRelease),
// under the oracle's lock, and marks the grant it removed.
func (o *oracle) remove(key string, act func() (driver.LockState, error), rm *removal) (driver.LockState, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st, err := act()
	if err != nil || !st.Held {
		return st, err
	}
	ks := o.key(key)
	if rm != nil {
		rm.guarded = ks.realWritten
	}
	for _, h := range st.Holders {
		if h.Token != 0 {
			ks.removed[grant{h.Owner, o.grantOf(h.Token)}] = true
		}
		for x := range ks.held {
			if x.owner == h.Owner && (h.Token == 0 || o.grantOf(x.token) == o.grantOf(h.Token)) {
				ks.removed[grant{x.owner, o.grantOf(x.token)}] = true
				if rm != nil {
					rm.recs = append(rm.recs, x)
				}
			}
		}
	}
	return st, nil
}

// forceReleased checks a Client's ForceRelease of key, which returned
// the fence floor and removed rm's holders: fenced storage raised to the
// floor must refuse every removed holder's late write.
func (o *oracle) forceReleased(ctx context.Context, key string, floor uint64, rm *removal) {
	o.mu.Lock()
	ks := o.key(key)
	ks.floor = max(ks.floor, floor)
	o.w.stats.forced.Add(1)
	var late []*rec
	for _, x := range rm.recs {
		if !x.ownOK() {
			continue // its holder knows it ended: it writes no more
		}
		late = append(late, x)
		if x.token > ks.floor && x.token >= ks.last {
			o.w.fail("ForceRelease of %q returned the fence floor %d, but the lease it removed, %s, valid for %v more by its own clock, can still write: the fence accepts token %d",
				key, floor, x, x.l.Validity(), x.token)
		}
	}
	o.mu.Unlock()
	// The store raises its fenced storage's guard where it has one; a
	// resource never written to has none, and takes the late write, as
	// it would before any holder wrote.
	if f := o.w.fence; f != nil && rm.guarded {
		for _, x := range late {
			if ok, err := f.Write(ctx, key, x.token); err == nil && ok {
				o.w.fail("ForceRelease of %q returned the fence floor %d, and the store's fenced storage accepted the late write of the lease it removed, %s", key, floor, x)
			}
		}
	}
}

package etcd

import (
	"context"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A shared lease lives as long as any lock of its class is renewed, so
// it cannot end one lock whose holder stopped renewing it: with the
// lease alone, a lock whose Extend calls stopped or failed — its holder
// has given it up by its own deadline — would stay in etcd for as long
// as the backend's other locks of the class kept the lease renewed, and
// nobody could take it. The backend therefore keeps, for each lock key
// it wrote under a shared lease, the revision of that write and the
// hold's own deadline (the start of its last grant or Extend plus its
// TTL in whole seconds, the TTL a lease of its own would have had), and
// one sweeper goroutine has each key whose deadline passed deleted, in a
// transaction that compares the key's mod revision with the write's: a
// key written since — taken again, handed over, moved, by any backend —
// is never touched. The lease still bounds what the sweeper cannot: when
// the process dies or is cut off from the cluster, nobody renews the
// lease, and etcd ends its keys after its TTL.
//
// A write whose outcome is unknown — an attempt that failed, and whose
// clean-up failed too (orphan) — is deleted at once if the key still
// holds its owner under its lease; when the backend still tracks another
// owner's write of the key, whose release may have landed unanswered,
// it goes with that write's sweep (a stray).
//
// An Extend moves the deadline forward when it starts, before its
// request goes out: an Extend whose reply is lost may have renewed the
// lease, and the hold then lasts until that Extend's start plus the TTL,
// as a lease of its own would; and the sweeper cannot delete a key
// whose Extend began in time while that Extend is in flight. An Extend
// that starts after the deadline reports the lock lost without asking
// etcd: its holder's own deadline, which began before the backend's,
// has passed too.

// sweepRetry is the pause before the sweeper tries a delete again after
// it failed (no leader, a connection lost).
const sweepRetry = time.Second

// cleanupAttempt bounds one delete of a clean-up: a drop's, a sweep's.
// A write proposed as the etcd leader dies is lost, and etcd answers it
// only when the request's deadline passes; the keys it was to delete —
// a failed waiter's key at the head of a queue, a lock nobody renews —
// stay until a later attempt, while the backend's other locks keep
// their shared lease alive. A short bound and a retry end them a
// second or two after the cluster has a leader again.
const cleanupAttempt = 2 * time.Second

// sweepParallel bounds the sweeper's deletes in flight: each goes out on
// its own, so that one left unanswered holds up no other.
const sweepParallel = 16

// holdState is where a tracked key is.
type holdState int

const (
	holdLive     holdState = iota // the sweeper deletes it once its deadline passed
	holdSweeping                  // the sweeper's delete is in flight
)

// hold is a key the backend wrote under a shared lease.
type hold struct {
	owner string
	// rev is the mod revision of the write that granted the key; 0 for a
	// key whose write's outcome is unknown (an attempt that failed, and
	// whose clean-up failed too), deleted if it is still owner's under
	// lease.
	rev      int64
	lease    clientv3.LeaseID
	deadline time.Time
	retry    time.Time // after a failed delete: when to try again (the deadline stays passed)
	state    holdState
	// strays are other owners' writes of the key, of unknown outcome,
	// that failed clean-ups handed over (orphan) while this write was
	// tracked: the key may be one of them (this write's release may
	// have landed unanswered), and the sweep deletes it if so.
	strays []stray
}

// stray is a write of owner under lease whose outcome is unknown.
type stray struct {
	owner string
	lease clientv3.LeaseID
}

// guard is the comparison under which the sweeper may delete key as
// owner's write under lease.
func (s stray) guard(key string) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(key), "=", s.owner),
		clientv3.Compare(clientv3.LeaseValue(key), "=", s.lease),
	}
}

// sweep is the transaction that deletes key if it is still the write h
// tracks, or one of strays.
func (h *hold) sweep(txn clientv3.Txn, key string, strays []stray) clientv3.Txn {
	del := []clientv3.Op{clientv3.OpDelete(key)}
	cmps := stray{h.owner, h.lease}.guard(key)
	if h.rev != 0 {
		cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", h.rev)}
	}
	var els []clientv3.Op
	for _, s := range strays {
		els = append(els, clientv3.OpTxn(s.guard(key), del, nil))
	}
	return txn.If(cmps...).Then(del...).Else(els...)
}

// forget stops tracking h, key's hold, unless it has strays: the first
// of them becomes key's hold, due at once.
func (s *sweeper) forget(key string, h *hold) {
	if len(h.strays) == 0 {
		delete(s.holds, key)
		return
	}
	first := h.strays[0]
	s.holds[key] = &hold{owner: first.owner, lease: first.lease, deadline: time.Now(), strays: h.strays[1:]}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sweeperState is where a backend's sweeper goroutine is.
type sweeperState int

const (
	sweeperIdle    sweeperState = iota // not started: nothing tracked yet
	sweeperRunning                     // started, until Close
	sweeperStopped                     // Close stopped it; nothing is tracked any more
)

// sweeper is a backend's tracked keys and the goroutine that deletes
// those whose deadline passed.
type sweeper struct {
	mu    sync.Mutex
	state sweeperState
	holds map[string]*hold // by etcd key
	next  time.Time        // when the goroutine wakes next
	kick  chan struct{}    // one signal: a deadline earlier than next, or a delete failed
	done  chan struct{}    // closed when the goroutine and its deletes have ended
}

// track records that the backend wrote key for owner at revision rev
// (0: unknown) under lease, held until deadline. It replaces what was
// tracked for key: the latest write is the one the key holds.
func (b *Backend) track(key, owner string, rev int64, lease clientv3.LeaseID, deadline time.Time) {
	s := &b.sweep
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case sweeperStopped:
		return
	case sweeperIdle:
		s.holds = make(map[string]*hold)
		s.kick = make(chan struct{}, 1)
		s.done = make(chan struct{})
		s.state = sweeperRunning
		go b.sweepLoop()
	}
	s.holds[key] = &hold{owner: owner, rev: rev, lease: lease, deadline: deadline}
	if !s.next.IsZero() && deadline.Before(s.next) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// orphan tracks key, written for owner under lease by an attempt whose
// outcome is unknown and whose clean-up failed, for deletion now. When
// the backend tracks a write of another owner for key, the orphan is a
// stray of that hold, deleted when it is swept: the tracked write may be
// gone (a release whose answer was lost) and the orphan the key's
// content, or the tracked write may be later, and the orphan gone.
func (b *Backend) orphan(key, owner string, lease clientv3.LeaseID) {
	s := &b.sweep
	s.mu.Lock()
	h := s.holds[key]
	if h != nil && h.owner != owner {
		h.strays = append(h.strays, stray{owner, lease})
	}
	s.mu.Unlock()
	if h == nil {
		b.track(key, owner, 0, lease, time.Now())
	}
}

// untrack forgets owner's write of key: it was deleted or handed over;
// its strays stay tracked. With owner empty it forgets every write of
// key: a forced release deleted it, whoever's it was.
func (b *Backend) untrack(key, owner string) {
	s := &b.sweep
	s.mu.Lock()
	defer s.mu.Unlock()
	switch h := s.holds[key]; {
	case h == nil:
	case owner == "":
		delete(s.holds, key)
	case h.owner == owner:
		s.forget(key, h)
	}
}

// untrackLease forgets the keys under lease, which ended on the server
// and took them with it.
func (b *Backend) untrackLease(lease clientv3.LeaseID) {
	s := &b.sweep
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, h := range s.holds {
		h.strays = slices.DeleteFunc(h.strays, func(st stray) bool { return st.lease == lease })
		if h.lease == lease {
			s.forget(k, h)
		}
	}
}

// extendOutcome is what an Extend learns from the tracked keys as it
// starts.
type extendOutcome int

const (
	extendUntracked extendOutcome = iota // the backend wrote no key for owner here
	extendTracked                        // deadline moved; rev is the tracked write
	extendExpired                        // the hold's deadline passed: it is over
)

// extending moves the deadline of owner's hold on key to now + hold, as
// an Extend starting at now does, and reports the write it tracks.
func (b *Backend) extending(key, owner string, now time.Time, hold time.Duration) (extendOutcome, int64) {
	s := &b.sweep
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[key]
	if h == nil || h.owner != owner || h.rev == 0 {
		return extendUntracked, 0
	}
	if h.state == holdSweeping || !now.Before(h.deadline) {
		return extendExpired, 0
	}
	if d := now.Add(hold); d.After(h.deadline) {
		h.deadline = d
	}
	return extendTracked, h.rev
}

// tracked reports how many keys the backend tracks (tests).
func (b *Backend) tracked() int {
	b.sweep.mu.Lock()
	defer b.sweep.mu.Unlock()
	return len(b.sweep.holds)
}

// stopSweeper ends the sweeper goroutine, cancelling a delete in flight
// (Close: b.stop is closed), and waits for it.
func (b *Backend) stopSweeper() {
	s := &b.sweep
	s.mu.Lock()
	running := s.state == sweeperRunning
	s.state, s.holds = sweeperStopped, nil
	s.mu.Unlock()
	if running {
		<-s.done
	}
}

// sweepLoop is the sweeper goroutine: it sleeps until the earliest
// deadline, sends the deletes of the keys whose deadline passed, each on
// its own goroutine (at most sweepParallel at once), and ends with Close
// once its deletes have.
func (b *Backend) sweepLoop() {
	s := &b.sweep
	var deletes sync.WaitGroup
	defer close(s.done)
	defer deletes.Wait()
	slots := make(chan struct{}, sweepParallel)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next, ok := b.dueHolds(time.Now())
		if !ok {
			return
		}
		for key, h := range due {
			select {
			case slots <- struct{}{}:
			case <-b.stop:
				return
			}
			deletes.Add(1)
			go func() {
				defer deletes.Done()
				defer func() { <-slots }()
				b.sweepOne(key, h)
			}()
		}
		timer.Reset(time.Until(next))
		select {
		case <-b.stop:
			return
		case <-s.kick:
		case <-timer.C:
		}
	}
}

// dueHolds marks the holds whose deadline passed by now as being swept
// and returns them, and when the goroutine is to wake next for the
// others; ok is false once the sweeper is stopped.
func (b *Backend) dueHolds(now time.Time) (due map[string]*hold, next time.Time, ok bool) {
	s := &b.sweep
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != sweeperRunning {
		return nil, time.Time{}, false
	}
	next = now.Add(time.Hour)
	for k, h := range s.holds {
		if h.state != holdLive {
			continue
		}
		if when := later(h.deadline, h.retry); now.Before(when) {
			if when.Before(next) {
				next = when
			}
			continue
		}
		if due == nil {
			due = make(map[string]*hold)
		}
		h.state = holdSweeping
		due[k] = h
	}
	s.next = next
	return due, next, true
}

// sweepOne deletes key if it is still the write h tracks, and forgets
// h; a delete that fails, or that etcd leaves unanswered for
// cleanupAttempt, is tried again after sweepRetry.
func (b *Backend) sweepOne(key string, h *hold) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupAttempt)
	defer cancel()
	go func() {
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	s := &b.sweep
	s.mu.Lock()
	strays := slices.Clone(h.strays) // orphan may add to them meanwhile
	s.mu.Unlock()
	_, err := h.sweep(b.cli.Txn(ctx), key, strays).Commit()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds[key] != h {
		return // written again meanwhile, or untracked
	}
	if err != nil {
		h.state, h.retry = holdLive, time.Now().Add(sweepRetry)
		// The loop may sleep past the retry: wake it to count it in.
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return
	}
	// Deleted, or no longer the tracked write nor a stray: either way
	// not the backend's to end any more. Strays added since are still
	// to be swept.
	h.strays = h.strays[len(strays):]
	s.forget(key, h)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

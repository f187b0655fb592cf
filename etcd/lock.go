package etcd

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseRetries bounds how often an acquisition takes a new shared lease
// after finding the last one ended on the server.
const leaseRetries = 3

// Acquire implements driver.Backend: it writes the lock key under the
// backend's shared lease of ttl's class (rounded up to whole seconds) if
// the key does not exist, or if owner already holds it, and renews that
// lease meanwhile, so that the lock lives ttl from the call at least.
// Nothing is left behind when the key is held by another owner; after
// an error the key, if written, is deleted by owner.
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	tok, ok, _, err := b.acquire(ctx, key, owner, ttl, false)
	return tok, ok, err
}

// AcquireSince implements driver.TimedAcquirer: Acquire, except that the
// shared lease is renewed beside the write only when its last answered
// grant or renewal would leave the lock less than nine tenths of ttl; since
// is then that grant or renewal's send time, less what the lease's TTL
// has above ttl (see AcquireWaitSince). Under a steady flow of
// acquisitions a pair of TryAcquire and Release is two calls to etcd.
func (b *Backend) AcquireSince(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, time.Time, error) {
	return b.acquire(ctx, key, owner, ttl, true)
}

// acquire is Acquire, and AcquireSince when early (a lock held from an
// earlier renewal of the lease will do).
func (b *Backend) acquire(ctx context.Context, key, owner string, ttl time.Duration, early bool) (uint64, bool, time.Time, error) {
	return b.acquireFrom(ctx, key, owner, ttl, early, 1)
}

// acquireFrom is acquire from its try-th attempt on.
func (b *Backend) acquireFrom(ctx context.Context, key, owner string, ttl time.Duration, early bool, try int) (_ uint64, _ bool, _ time.Time, err error) {
	defer func() { err = permission(err, "take the lock "+b.LockKey(key)) }()
	for ; ; try++ {
		a, err := b.newAttempt(ctx, b.LockKey(key), owner, ttl)
		if err != nil {
			return 0, false, time.Time{}, err
		}
		renewed := b.renewing(ctx, a.l, !a.renews(early))
		resp, err := b.commitWrite(ctx, a.w)
		tok, ok, since, again, err := b.endAttempt(ctx, a, resp, err, <-renewed)
		if again && try < leaseRetries {
			continue
		}
		return tok, ok, since, err
	}
}

// attempt is one try of an acquisition: the shared lease it writes the
// lock key under, and its write.
type attempt struct {
	lk, owner string
	ttl       time.Duration
	l         *sharedLease
	fresh     bool      // this attempt granted l
	start     time.Time // after l was granted: the lock's time counts from it
	w         *write
}

// newAttempt starts an attempt of owner on lock key lk: the shared lease
// of ttl's class, granted when there is none, and the write of take.
func (b *Backend) newAttempt(ctx context.Context, lk, owner string, ttl time.Duration) (*attempt, error) {
	l, fresh, err := b.lease(ctx, leaseSeconds(ttl))
	if err != nil {
		return nil, err
	}
	return &attempt{lk: lk, owner: owner, ttl: ttl, l: l, fresh: fresh, start: time.Now(), w: takeWrite(lk, owner, l.id)}, nil
}

// renews reports whether a's lease must be renewed beside its write: not
// when a granted it, nor, when early, while its last renewal holds the
// lock for all but a tenth of the TTL.
func (a *attempt) renews(early bool) bool {
	return !a.fresh && !(early && a.l.holds(a.start, a.ttl))
}

// endAttempt ends a, whose write etcd answered with resp or err and the
// renewal of whose lease with rerr (nil when none was sent). It returns
// the token, whether the lock was taken and from when it is held, or
// again: the lease ended on the server, and the acquisition may try
// again on a new one. After an error the key, if written, is dropped.
func (b *Backend) endAttempt(ctx context.Context, a *attempt, resp *clientv3.TxnResponse, err, rerr error) (_ uint64, _ bool, _ time.Time, again bool, _ error) {
	tok, ok, _, err := taken(resp, err)
	switch {
	case leaseGone(err) || (ok && rerr == errLeaseLost):
		// The lease ended on the server: the key was not written, or
		// went with it. Take it again on a new lease.
		b.lost(a.l)
		if err == nil {
			err = errLeaseLost
		}
		return 0, false, time.Time{}, true, err
	case err != nil:
		b.drop(ctx, a.lk, a.owner, "", a.l.id)
		return 0, false, time.Time{}, false, err
	case !ok:
		return 0, false, time.Time{}, false, nil
	case rerr != nil:
		// Taken, but its lease's time from now on is unknown.
		b.drop(ctx, a.lk, a.owner, "", a.l.id)
		return 0, false, time.Time{}, false, rerr
	}
	b.track(a.lk, a.owner, int64(tok), a.l.id, a.start.Add(a.l.hold()))
	return tok, true, a.l.since(a.start, a.ttl), false, nil
}

// take writes lk = owner under lease id if lk is free or already owner's,
// in one transaction, together with more (more writes on other keys). It
// returns the token and, when another owner holds lk, the store revision
// at which it was seen held. A re-grant to the same owner (a retry after
// a lost reply) moves the key to id and leaves its old lease alone: that
// may be a lease other locks share.
func (b *Backend) take(ctx context.Context, lk, owner string, id clientv3.LeaseID, more ...clientv3.Op) (token uint64, ok bool, rev int64, err error) {
	return taken(b.commitWrite(ctx, takeWrite(lk, owner, id, more...)))
}

// takeWrite is take's write.
func takeWrite(lk, owner string, id clientv3.LeaseID, more ...clientv3.Op) *write {
	put := clientv3.OpPut(lk, owner, clientv3.WithLease(id))
	then := append([]clientv3.Op{put}, more...)
	return newWrite(lk, owner,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(lk), "=", 0)},
		then,
		[]clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(lk), "=", owner)},
			then,
			nil,
		)})
}

// taken is take's outcome from its write's answer.
func taken(resp *clientv3.TxnResponse, err error) (token uint64, ok bool, rev int64, _ error) {
	if err != nil {
		return 0, false, 0, err
	}
	if resp.Succeeded || resp.Responses[0].GetResponseTxn().GetSucceeded() {
		// The write's revision: the key's create revision, or its mod
		// revision when owner held it already — larger than every token
		// before.
		return uint64(resp.Header.Revision), true, 0, nil
	}
	return 0, false, resp.Header.Revision, nil
}

// Extend implements driver.Backend. It checks that owner holds key and
// renews the key's lease; the renewal of the shared lease of ttl's class
// goes out alongside the check, since that is the lease the key is
// under unless it was moved. When ttl needs more seconds than the key's
// lease was granted, the key moves to the shared lease of ttl's class.
// The hold's own deadline moves to the call's start plus the TTL before
// anything is sent (see sweep.go); a hold whose deadline passed is over.
// A key owner holds that is not the write this backend tracks — written
// since by another process with the same owner id, or by a version with
// a lease per lock — moves to this backend's shared lease, so that its
// end is this backend's deadline and no other's.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	defer func() { err = permission(err, "renew the lock "+b.LockKey(key)) }()
	start := time.Now()
	lk, secs := b.LockKey(key), leaseSeconds(ttl)
	guess := b.current(secs)
	hold := time.Duration(secs) * time.Second
	if guess != nil {
		hold = guess.hold()
	}
	tracking, rev := b.extending(lk, owner, start, hold)
	if tracking == extendExpired {
		return false, nil
	}
	var renewed <-chan error
	if guess != nil {
		renewed = b.renewing(ctx, guess, false)
	}
	resp, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(lk), "=", owner)).Then(clientv3.OpGet(lk)).Commit()
	var rerr error
	if renewed != nil {
		rerr = <-renewed
	}
	if err != nil {
		return false, err
	}
	var kvs []*mvccpb.KeyValue
	if resp.Succeeded {
		kvs = resp.Responses[0].GetResponseRange().GetKvs()
	}
	if len(kvs) == 0 {
		b.untrack(lk, owner)
		return false, nil
	}
	id := clientv3.LeaseID(kvs[0].Lease)
	if id == clientv3.NoLease {
		return true, nil
	}
	if tracking != extendTracked || kvs[0].ModRevision != rev {
		return b.move(ctx, lk, owner, kvs[0].ModRevision, id, secs, start)
	}
	var granted int64
	if guess != nil && id == guess.id {
		if rerr != nil {
			return false, lostIsFalse(rerr)
		}
		granted = guess.ttl
	} else if granted, err = b.renewID(ctx, id); err != nil {
		return false, lostIsFalse(err)
	}
	if granted >= secs {
		return true, nil
	}
	return b.move(ctx, lk, owner, kvs[0].ModRevision, id, secs, start)
}

// lostIsFalse turns errLeaseLost into the answer "no longer held".
func lostIsFalse(err error) error {
	if err == errLeaseLost {
		return nil
	}
	return err
}

// move puts lk, held by owner at revision rev under lease from, onto the
// shared lease of class secs, renewed from now on, and tracks it as
// written by an Extend that began at start. A key changed meanwhile is
// not owner's any more, or was re-granted: its holder's next Extend
// looks again.
func (b *Backend) move(ctx context.Context, lk, owner string, rev int64, from clientv3.LeaseID, secs int64, start time.Time) (bool, error) {
	for try := 1; ; try++ {
		l, fresh, err := b.lease(ctx, secs)
		if err != nil {
			return false, err
		}
		renewed := b.renewing(ctx, l, fresh)
		resp, err := b.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.Value(lk), "=", owner),
			clientv3.Compare(clientv3.ModRevision(lk), "=", rev),
			clientv3.Compare(clientv3.LeaseValue(lk), "=", from),
		).Then(clientv3.OpPut(lk, owner, clientv3.WithLease(l.id))).Commit()
		rerr := <-renewed
		if leaseGone(err) || (err == nil && resp.Succeeded && rerr == errLeaseLost) {
			b.lost(l)
			if try < leaseRetries {
				continue
			}
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if resp.Succeeded {
			b.track(lk, owner, resp.Header.Revision, l.id, start.Add(l.hold()))
		}
		if rerr != nil {
			return false, rerr
		}
		return resp.Succeeded, nil
	}
}

// Release implements driver.Backend: one transaction deletes the lock
// key if owner holds it — or gives it to the backend's first waiter for
// key, when that waiter is first in key's queue (see handoff.go) — one
// write to etcd's log. The lease stays: other locks may share it.
func (b *Backend) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	defer func() { err = permission(err, "release the lock "+b.LockKey(key)) }()
	return b.release(ctx, key, owner)
}

// deleteOwned deletes lk if owner holds it, and the waiter key qk (when
// not empty) whatever lk holds, in one transaction. It reports whether
// it deleted lk.
func (b *Backend) deleteOwned(ctx context.Context, lk, owner, qk string) (bool, error) {
	return deleted(b.commitWrite(ctx, deleteWrite(lk, owner, qk)))
}

// deleteWrite is deleteOwned's write.
func deleteWrite(lk, owner, qk string) *write {
	then := []clientv3.Op{clientv3.OpDelete(lk)}
	var els []clientv3.Op
	if qk != "" {
		then = append(then, clientv3.OpDelete(qk))
		els = append(els, clientv3.OpDelete(qk))
	}
	return newWrite(lk, owner, []clientv3.Cmp{clientv3.Compare(clientv3.Value(lk), "=", owner)}, then, els)
}

// deleted is deleteOwned's outcome from its write's answer.
func deleted(resp *clientv3.TxnResponse, err error) (bool, error) {
	if err != nil || !resp.Succeeded {
		return false, err
	}
	return resp.Responses[0].GetResponseDeleteRange().GetDeleted() > 0, nil
}

// drop deletes lk if owner holds it, and qk, after an attempt whose
// outcome is unknown, even when ctx is done. It waits only as long as
// ctx allows — a caller's deadline holds even when the cluster cannot
// answer — and the deletion goes on in the background for up to
// cleanupAttempt, or until Close. If it fails, or etcd leaves it
// unanswered (a write lost as the leader died), the sweeper deletes the
// keys that are still owner's under lease, the shared lease the attempt
// wrote them under, and tries again until it can: the lease alone may
// outlive them, renewed by other locks.
func (b *Backend) drop(ctx context.Context, lk, owner, qk string, lease clientv3.LeaseID) {
	b.background(ctx, func(cctx context.Context) {
		actx, cancel := context.WithTimeout(cctx, cleanupAttempt)
		defer cancel()
		if _, err := b.deleteOwned(actx, lk, owner, qk); err != nil {
			b.orphan(lk, owner, lease)
			if qk != "" {
				b.orphan(qk, owner, lease)
			}
		}
	})
}

// revoke drops a lease that no longer holds a lock, even when ctx is
// done, as drop does.
func (b *Backend) revoke(ctx context.Context, id clientv3.LeaseID) {
	b.background(ctx, func(cctx context.Context) { _, _ = b.cli.Revoke(cctx, id) })
}

// background runs clean-up f on a context of its own, bounded by
// cleanupCtx and ended by Close, and waits for it as long as ctx allows.
func (b *Backend) background(ctx context.Context, f func(context.Context)) {
	done := make(chan struct{})
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		defer close(done)
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		go func() {
			select {
			case <-b.stop:
				cancel()
			case <-cctx.Done():
			}
		}()
		f(cctx)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

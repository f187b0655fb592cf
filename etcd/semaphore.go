package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Semaphore is the view of a Backend that turnstile.Semaphore returns: up
// to a fixed number of owners hold each key at once, each lease one
// permit. Permits expire like locks, so the Client's watchdog renews
// them, and a crashed holder's permit comes back after its TTL.
//
// The permits of key K are the keys <prefix>semaphore/<escaped K>/holders/<owner>,
// each under a lease of its own, each holding the number of permits it
// was taken with. An acquisition reads the holders, and writes its own
// key in a transaction that fails if any holder key was written after
// that read, so no more than the number of permits are ever held. The
// number is stored with the holders: while any permit is held, an
// acquisition through a view made with another number is refused with an
// error matching turnstile.ErrInvalidOption that names both; once none is
// held, the next acquisition's number holds. A permit's token is the
// revision of the write that granted it.
//
// Waiting (driver.Queuer): a waiter writes …/queue/<owner> under its
// lease and takes a permit only while more are free than waiters queued
// before it, so permits go to waiters in arrival order; it watches the
// semaphore's directory for the deletions that may free one. Acquire
// (TryAcquire) does not queue and may take a free permit ahead of the
// queue, as the plain lock's does.
//
// A Semaphore of more than one permit is driver.Shared: a Client's
// waiters wait on their own rather than in its local line, so they take
// free permits together.
type Semaphore struct {
	b       *Backend
	permits int
	num     string // permits, as stored
}

var (
	_ driver.Backend = (*Semaphore)(nil)
	_ driver.Queuer  = (*Semaphore)(nil)
	_ driver.Namer   = (*Semaphore)(nil)
	_ driver.Shared  = (*Semaphore)(nil)
)

// Permits returns how many owners may hold a key at once.
func (s *Semaphore) Permits() int { return s.permits }

// Name implements driver.Namer.
func (s *Semaphore) Name() string { return fmt.Sprintf("%s semaphore(%d)", s.b.Name(), s.permits) }

// Shared implements driver.Shared: up to permits holders at once, so a
// Client lets its waiters wait on their own.
func (s *Semaphore) Shared() bool { return s.permits > 1 }

// dirs are key's holders and queue directories.
func (s *Semaphore) dirs(key string) (holders, queue string) {
	dir := s.b.kindDir("semaphore", key)
	return dir + "holders/", dir + "queue/"
}

// Acquire implements driver.Backend: it takes one permit of key for
// owner if one is free.
func (s *Semaphore) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, _ bool, err error) {
	holders, _ := s.dirs(key)
	defer func() { err = permission(err, "take a permit of "+holders) }()
	if err := checkOwner(owner); err != nil {
		return 0, false, err
	}
	lease := &lazyLease{b: s.b, ttl: ttl}
	tok, ok, _, _, err := s.take(ctx, key, owner, lease.get, 0)
	if err != nil || !ok {
		lease.revoke(ctx)
	}
	return tok, ok, err
}

// AcquireWait implements driver.Queuer: owner queues for a permit of key.
func (s *Semaphore) AcquireWait(ctx context.Context, key, owner string, ttl time.Duration) (_ uint64, err error) {
	holders, queue := s.dirs(key)
	defer func() { err = permission(err, "queue for a permit of "+holders) }()
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	w, err := s.b.newWaiter(ctx, ttl)
	if err != nil {
		return 0, err
	}
	tok, err := s.wait(ctx, w, key, owner, queue)
	return s.b.waitDone(ctx, w, tok, err)
}

func (s *Semaphore) wait(ctx context.Context, w *waiter, key, owner, queue string) (uint64, error) {
	me := queue + ownerName(owner)
	place, err := w.place(ctx, me, owner)
	if err != nil {
		return 0, err
	}
	dir := s.b.kindDir("semaphore", key)
	lease := func(context.Context) (clientv3.LeaseID, error) { return w.id, nil }
	for {
		tok, ok, rev, ahead, err := s.take(ctx, key, owner, lease, place, clientv3.OpDelete(me))
		if err != nil || ok {
			return tok, err
		}
		if ahead < s.permits {
			// Near the front: a permit returned or a waiter ahead
			// leaving may let it in.
			err = w.waitFor(ctx, dir, true, rev+1, nil)
		} else {
			// Further back: nothing changes for it until the waiter
			// just ahead of it leaves.
			err = s.behind(ctx, w, queue, place)
		}
		if err != nil {
			return 0, err
		}
	}
}

// behind waits until the waiter just ahead of place in queue leaves.
func (s *Semaphore) behind(ctx context.Context, w *waiter, queue string, place int64) error {
	prev, err := w.predecessors(ctx, queue, place, false)
	if err != nil || len(prev.Kvs) == 0 {
		return err
	}
	return w.waitFor(ctx, string(prev.Kvs[0].Key), false, prev.Header.Revision+1, nil)
}

// take writes owner's permit of key under the lease from lease, with
// more, if fewer than the permits are held by others, counting the
// waiters queued before place too when place is not 0. Otherwise it
// returns the revision at which it read the holders, and how many
// waiters are ahead of place.
func (s *Semaphore) take(ctx context.Context, key, owner string, lease func(context.Context) (clientv3.LeaseID, error), place int64, more ...clientv3.Op) (token uint64, ok bool, rev int64, ahead int, err error) {
	holders, queue := s.dirs(key)
	mine := holders + ownerName(owner)
	reads := []clientv3.Op{clientv3.OpGet(holders, clientv3.WithPrefix())}
	if place > 0 {
		// Keys, not a count: etcd counts a range before it filters by
		// create revision.
		reads = append(reads, clientv3.OpGet(queue, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(place-1)))
	}
	for {
		resp, err := s.b.cli.Txn(ctx).Then(reads...).Commit()
		if err != nil {
			return 0, false, 0, 0, err
		}
		seen := resp.Header.Revision
		held := 0
		for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
			if string(kv.Value) != s.num {
				return 0, false, 0, 0, fmt.Errorf("%w: etcd: the semaphore %s is held with %s permits; this view has %d (every view of one key must use one number while any permit is held)",
					turnstile.ErrInvalidOption, holders, string(kv.Value), s.permits)
			}
			if string(kv.Key) != mine {
				held++
			}
		}
		ahead = 0
		if place > 0 {
			ahead = len(resp.Responses[1].GetResponseRange().GetKvs())
		}
		if held+ahead >= s.permits {
			return 0, false, seen, ahead, nil
		}
		id, err := lease(ctx)
		if err != nil {
			return 0, false, 0, 0, err
		}
		put, err := s.b.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(holders), "<", seen+1).WithPrefix()).
			Then(append([]clientv3.Op{clientv3.OpPut(mine, s.num, clientv3.WithLease(id), clientv3.WithPrevKV())}, more...)...).
			Commit()
		if err != nil {
			return 0, false, 0, 0, err
		}
		if !put.Succeeded {
			continue // a permit was taken meanwhile: count again
		}
		// A retry of owner's own acquisition leaves its earlier lease
		// without a key.
		if prev := put.Responses[0].GetResponsePut().GetPrevKv(); prev != nil && prev.Lease != 0 && clientv3.LeaseID(prev.Lease) != id {
			s.b.revoke(ctx, clientv3.LeaseID(prev.Lease))
		}
		return uint64(put.Header.Revision), true, 0, 0, nil
	}
}

// Extend implements driver.Backend: it renews owner's permit only.
func (s *Semaphore) Extend(ctx context.Context, key, owner string, ttl time.Duration) (_ bool, err error) {
	holders, _ := s.dirs(key)
	defer func() { err = permission(err, "renew a permit of "+holders) }()
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	mine := holders + ownerName(owner)
	return s.b.extendKeys(ctx, clientv3.Compare(clientv3.CreateRevision(mine), ">", 0), []string{mine}, ttl)
}

// Release implements driver.Backend: it returns owner's permit.
func (s *Semaphore) Release(ctx context.Context, key, owner string) (_ bool, err error) {
	holders, _ := s.dirs(key)
	defer func() { err = permission(err, "return a permit of "+holders) }()
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	mine := holders + ownerName(owner)
	return s.b.releaseLease(ctx, mine, clientv3.Compare(clientv3.CreateRevision(mine), ">", 0))
}

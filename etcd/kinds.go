package etcd

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds beside the plain lock, for turnstile.Reentrant,
// turnstile.Semaphore and turnstile.ReadWrite. Each is a view of a
// Backend that keeps its state of a key in a directory of its own,
// <prefix><kind>/<escaped key>/, so that the kinds on one name do not
// exclude each other nor the plain lock. As with the plain lock, every
// holder's key lives under an etcd lease of its own that the Client's
// watchdog renews (Extend), so a crashed holder's hold comes back after
// its TTL, and every fencing token is the etcd revision of the write that
// granted the hold: revisions are cluster-wide and only grow, so tokens
// increase per key across holders and across kinds. Each view is a
// driver.Queuer: its waiters wait in etcd, on watches, rather than
// polling. The fair lock needs no view: Backend is a driver.Queuer and
// serves its queue in arrival order.
var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
)

// ReentrantView implements driver.Reentranter: a *Reentrant.
func (b *Backend) ReentrantView(driver.KindConfig) (driver.Backend, error) {
	return &Reentrant{b: b}, nil
}

// SemaphoreView implements driver.Semaphorer: a *Semaphore of
// cfg.Permits permits.
func (b *Backend) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	return &Semaphore{b: b, permits: cfg.Permits, num: strconv.Itoa(cfg.Permits)}, nil
}

// ReadWriteView implements driver.ReadWriter: a *ReadLock and a
// *WriteLock. Waiting writers queue in order and need no claim:
// cfg.WriterClaim has no effect.
func (b *Backend) ReadWriteView(driver.KindConfig) (read, write driver.Backend, err error) {
	rw := &rwLock{b: b}
	return &ReadLock{rw: rw}, &WriteLock{rw: rw}, nil
}

// kindDir is the directory of key's state of one lock kind. The key is
// escaped so that no key's directory contains another's.
func (b *Backend) kindDir(kind, key string) string {
	return b.cfg.prefix + kind + "/" + url.PathEscape(key) + "/"
}

// ownerName is owner as the last element of an etcd key.
func ownerName(owner string) string { return url.PathEscape(owner) }

// checkOwner refuses an owner the kinds cannot name a key after.
func checkOwner(owner string) error {
	if owner == "" {
		return fmt.Errorf("%w: etcd: empty owner", turnstile.ErrInvalidOption)
	}
	return nil
}

// empty compares true when no key lies under dir.
func empty(dir string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()
}

// lazyLease is the lease of one acquisition that may need none: get
// grants it, for ttl, on its first call, and returns it again on later
// calls.
type lazyLease struct {
	b       *Backend
	ttl     time.Duration
	granted clientv3.LeaseID
}

func (l *lazyLease) get(ctx context.Context) (clientv3.LeaseID, error) {
	if l.granted == clientv3.NoLease {
		g, err := l.b.cli.Grant(ctx, leaseSeconds(l.ttl))
		if err != nil {
			return 0, err
		}
		l.granted = g.ID
	}
	return l.granted, nil
}

// revoke revokes the lease, if get granted one.
func (l *lazyLease) revoke(ctx context.Context) {
	if l.granted != clientv3.NoLease {
		l.b.revoke(ctx, l.granted)
	}
}

package redis

import (
	"cmp"

	"github.com/turnstilelock/turnstile/driver"
)

// The lock kinds, for turnstile.Reentrant, turnstile.Semaphore,
// turnstile.ReadWrite and turnstile.Fair, which check their settings and
// hand them here.
var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
	_ driver.Fairer      = (*Backend)(nil)
)

// ReentrantView implements driver.Reentranter: a *Reentrant.
func (b *Backend) ReentrantView(driver.KindConfig) (driver.Backend, error) {
	return &Reentrant{b: b}, nil
}

// SemaphoreView implements driver.Semaphorer: a *Semaphore of
// cfg.Permits permits.
func (b *Backend) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	return &Semaphore{b: b, permits: cfg.Permits}, nil
}

// ReadWriteView implements driver.ReadWriter: a *ReadLock and a
// *WriteLock whose waiting writers claim the lock for cfg.Claim().
func (b *Backend) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	rw := &rwLock{b: b, claim: cfg.Claim()}
	return &ReadLock{rw: rw}, &WriteLock{rw: rw}, nil
}

// FairView implements driver.Fairer: a *Fair whose waiters keep their
// place for cfg.WaiterTimeout without a heartbeat (DefaultWaiterTimeout)
// and, first in line, look again every cfg.PollInterval
// (DefaultFairPoll).
func (b *Backend) FairView(cfg driver.KindConfig) (driver.Backend, error) {
	return &Fair{b: b, timeout: cmp.Or(cfg.WaiterTimeout, DefaultWaiterTimeout), poll: cmp.Or(cfg.PollInterval, DefaultFairPoll)}, nil
}

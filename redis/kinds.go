package redis

import "github.com/turnstilelock/turnstile/driver"

// The lock kinds as driver's kind interfaces, for turnstile.Reentrant,
// turnstile.Semaphore, turnstile.ReadWrite and turnstile.Fair: each is the
// Backend method of the same name with its default options.
var (
	_ driver.Reentranter = (*Backend)(nil)
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
	_ driver.Fairer      = (*Backend)(nil)
)

// ReentrantView implements driver.Reentranter: b.Reentrant().
func (b *Backend) ReentrantView() (driver.Backend, error) { return b.Reentrant(), nil }

// SemaphoreView implements driver.Semaphorer: b.Semaphore(permits).
func (b *Backend) SemaphoreView(permits int) (driver.Backend, error) {
	return b.Semaphore(permits)
}

// ReadWriteView implements driver.ReadWriter: the two sides of
// b.ReadWrite().
func (b *Backend) ReadWriteView() (read, write driver.Backend, err error) {
	rw, err := b.ReadWrite()
	if err != nil {
		return nil, nil, err
	}
	return rw.Read(), rw.Write(), nil
}

// FairView implements driver.Fairer: b.Fair().
func (b *Backend) FairView() (driver.Backend, error) { return b.Fair() }

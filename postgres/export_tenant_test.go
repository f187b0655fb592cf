package postgres

// LockID is the advisory lock id under which b locks key.
func LockID(b *Backend, key string) int64 { return b.lockID(key) }

// SetLockID makes b lock key under f(key), so that a test can make keys
// collide.
func SetLockID(b *Backend, f func(key string) int64) { b.lockID = f }

package mysql

// UserLockName is the GET_LOCK name under which b locks key.
func UserLockName(b *Backend, key string) string { return b.userLock(key) }

package zookeeper

import "time"

// ForgetHold makes b forget that it took key for owner, as a Backend
// that lost the reply to its Acquire knows nothing of the node.
func (b *Backend) ForgetHold(key, owner string) { b.drop(holdKey{key, owner}) }

// CutSession makes b see the session timeout granted at its last
// connection as d, as a reconnection to a server with a lower
// maxSessionTimeout does.
func (b *Backend) CutSession(d time.Duration) { b.tracker.granted.Store(int64(d)) }

// BeforeList makes b's Acquire and AcquireWait run f between creating
// their node and their first look at the queue.
func (b *Backend) BeforeList(f func()) { b.beforeList = f }

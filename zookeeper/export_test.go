package zookeeper

// ForgetHold makes b forget that it took key for owner, as a Backend
// that lost the reply to its Acquire knows nothing of the node.
func (b *Backend) ForgetHold(key, owner string) { b.drop(holdKey{key, owner}) }

package fallback

// LeaseCount is how many leases the Backend remembers.
func (b *Backend) LeaseCount() int { return b.leases.len() }

package redlock

import "time"

// Validity exposes the validity formula (TTL − elapsed − drift) to the
// external tests.
func Validity(ttl, elapsed time.Duration) time.Duration { return validity(ttl, elapsed) }

// NodeTimeout exposes the per-call node timeout for a lease of ttl.
func (b *Backend) NodeTimeout(ttl time.Duration) time.Duration { return b.cfg.timeout(ttl) }

// SetClock replaces the clock a Backend measures validity with.
func (b *Backend) SetClock(now func() time.Time) { b.now = now }

// ParseURL exposes the URL parser to the external tests.
var ParseURL = parseURL

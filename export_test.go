package turnstile

// WatchdogScans is how many times c's watchdog scheduler has looked at
// its leases.
func (c *Client) WatchdogScans() int64 { return c.wd.scans.Load() }

// HeadReady reports whether the head of c's line for key is ready to
// take a handoff from a releasing lease of c.
func HeadReady(c *Client, key string) bool {
	ln, ok := c.lines.load(key)
	if !ok {
		return false
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return len(ln.waiters) > 0 && ln.waiters[0].state == waiterParked
}

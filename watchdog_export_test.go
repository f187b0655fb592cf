package turnstile

// WatchdogAsleep reports whether c's watchdog scheduler is running and
// sleeping on its timer until its next look at its leases.
func (c *Client) WatchdogAsleep() bool {
	c.wd.mu.Lock()
	defer c.wd.mu.Unlock()
	return c.wd.running && c.wd.wakeAt != 0
}

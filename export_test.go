package turnstile

// WatchdogScans is how many times c's watchdog scheduler has looked at
// its leases.
func (c *Client) WatchdogScans() int64 { return c.wd.scans.Load() }

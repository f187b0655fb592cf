package turnstile

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// Lock delay (WithLockDelay): the store holds every lock for the lease's
// TTL plus the delay, so that a holder that fails leaves its lock taken
// for the delay past its lease; a clean release frees it at once. What
// the rest of the Client does about it: contend.go, queue.go, lease.go
// and watchdog.go ask the store for config.storeTTL; lifecycle.go keeps
// Release of a lost lease from freeing its lock early; handoff.go hands a
// lock only to a waiter with the same delay.

// lockDelayParam is the query parameter of every backend URL that sets
// the lock delay: Open reads it and takes it out of the URL before the
// backend sees it.
const lockDelayParam = "lock_delay"

// checkLockDelay refuses a lock delay the Client's backend, or the queue
// it turns to when busy (WithQueueWhenBusy), cannot keep.
func (c *Client) checkLockDelay(cfg *config) error {
	if cfg.lockDelay == 0 {
		return nil
	}
	name := c.name
	ok := c.holdsTTL
	if q := c.cfg.busyQueue; ok && q != nil {
		h, is := q.(driver.TTLHolder)
		ok = is && h.HoldsTTL()
		if b, is := q.(driver.Backend); is {
			name = driver.Name(b)
		}
	}
	if !ok {
		return fmt.Errorf("%w: WithLockDelay(%v): %w: the locks of %s do not last their TTL alone (driver.TTLHolder), so a failed holder's lock cannot be kept for the delay",
			ErrInvalidOption, cfg.lockDelay, ErrUnsupported, name)
	}
	return nil
}

// takeLockDelay reads lock_delay from u's query, removes it from u, and
// returns it (0 when absent). The other parameters are left as written.
func takeLockDelay(u *url.URL) (d time.Duration, found bool, err error) {
	if u.RawQuery == "" {
		return 0, false, nil
	}
	var kept []string
	for _, part := range strings.Split(u.RawQuery, "&") {
		name, value, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err != nil || n != lockDelayParam {
			kept = append(kept, part)
			continue
		}
		if found {
			return 0, false, fmt.Errorf("%w: query parameter %s given twice", ErrInvalidOption, lockDelayParam)
		}
		found = true
		v, err := url.QueryUnescape(value)
		if err == nil {
			d, err = time.ParseDuration(v)
		}
		if err != nil {
			return 0, false, fmt.Errorf("%w: %s=%q is not a duration (want one such as 2s or 500ms)", ErrInvalidOption, lockDelayParam, value)
		}
		if err := WithLockDelay(d)(&config{}); err != nil {
			return 0, false, fmt.Errorf("%s=%q: %w", lockDelayParam, value, err)
		}
	}
	if found {
		u.RawQuery = strings.Join(kept, "&")
		u.ForceQuery = false
	}
	return d, found, nil
}

// lockDelayFromURL merges the URL's lock delay into cfg: the URL and the
// options must not disagree.
func lockDelayFromURL(cfg *config, u *url.URL) (Option, error) {
	d, found, err := takeLockDelay(u)
	if err != nil || !found {
		return nil, err
	}
	if cfg.lockDelay != 0 && cfg.lockDelay != d {
		return nil, fmt.Errorf("%w: %s=%v in the URL and WithLockDelay(%v) disagree", ErrInvalidOption, lockDelayParam, d, cfg.lockDelay)
	}
	cfg.lockDelay = d
	return WithLockDelay(d), nil
}

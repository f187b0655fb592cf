package proc

import (
	"fmt"
	"time"
)

// Addrs are the host:port addresses of servers, by index: a cluster's
// members, say.
func Addrs[S interface{ Addr() string }](servers []S) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// KillAll stops every one of servers with SIGKILL (see Member.Kill).
func KillAll[S interface{ Kill() }](servers []S) {
	for _, s := range servers {
		s.Kill()
	}
}

// WaitHealthy calls healthy every interval until it returns nil, for at
// most timeout: a cluster's check that its members answer and agree. Its
// error says that what was not healthy within timeout, and healthy's
// last error why.
func WaitHealthy(what string, timeout, interval time.Duration, healthy func() error) error {
	if err := Poll(timeout, interval, healthy); err != nil {
		return fmt.Errorf("%s not healthy within %v: %w", what, timeout, err)
	}
	return nil
}

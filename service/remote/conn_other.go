//go:build !linux

package remote

import (
	"syscall"
	"time"
)

// userTimeout does nothing where TCP_USER_TIMEOUT is not known: a call
// to an instance that vanished ends with its deadline.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}

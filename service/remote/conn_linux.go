package remote

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// userTimeout is a net.Dialer's Control that bounds how long data sent on
// a connection may go unacknowledged before the kernel gives up on the
// peer (TCP_USER_TIMEOUT): a call to an instance that vanished fails
// then, instead of at the end of its deadline.
func userTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
		})
		if err != nil {
			return err
		}
		return serr
	}
}

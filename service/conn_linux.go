package service

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout bounds how long data sent to c may stay unacknowledged
// before the kernel gives up on the peer (TCP_USER_TIMEOUT): a client
// that vanished while the instance was sending it renewals is found
// although keepalive probes only start on an idle connection.
func setUserTimeout(c *net.TCPConn, d time.Duration) {
	if d <= 0 {
		return
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
}

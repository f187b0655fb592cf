//go:build !linux

package service

import (
	"net"
	"time"
)

// setUserTimeout does nothing here: keepalive probes alone find a
// silent client.
func setUserTimeout(*net.TCPConn, time.Duration) {}

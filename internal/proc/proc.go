// Package proc holds what every test-server launcher (redisproc, etcdproc,
// zkproc, pgproc, mysqlproc) needs: a free loopback port, a server
// process that dies with whoever started it, the controls a
// fault-injection test has over it (Process: pause, resume, kill), and
// the loops that start a group of servers and wait for it.
package proc

import "net"

// FreePort returns a loopback TCP port that was free a moment ago.
// Launchers retry on another port when the server then fails to bind it.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

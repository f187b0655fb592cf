// Package proctest holds what the tests of the test-server launchers
// (etcdproc, zkproc, redisproc, mysqlproc, pgproc) and their users
// share: TCP forwarders a test puts between a cluster's members to cut
// some of them off, a poll that fails the test when a condition does not
// come to hold, and a jump of a server's clock while a session is open.
package proctest

import (
	"io"
	"net"
	"sync"
)

// Links are TCP forwarders on loopback that a test puts in front of
// servers' ports, so that it can cut some of the connections between
// them. Each connection a link forwards is tracked under a key of the
// test's (say, the pair of servers it joins), by which Drop closes it.
// The Links' lock (Lock, Unlock) guards the test's own state as well:
// the admit function that Forward calls runs with it held, as Drop
// must. The zero value has no links; Close closes them.
type Links[K any] struct {
	sync.Mutex
	conns map[net.Conn]K
	lns   []net.Listener
	wg    sync.WaitGroup
}

// Listen opens a link on a free loopback port and returns its address:
// every connection it accepts is passed to accept, which is called in
// the link's accepting goroutine and usually calls Forward.
func (l *Links[K]) Listen(accept func(c net.Conn)) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	l.Lock()
	l.lns = append(l.lns, ln)
	l.Unlock()
	l.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accept(c)
		}
	})
	return ln.Addr().String(), nil
}

// Go runs f in a goroutine of its own, which Close waits for.
func (l *Links[K]) Go(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// Forward dials addr for c, a connection a link accepted, and copies
// bytes both ways between the two until either side closes, having
// first written head (what was already read from c) to addr. Once addr
// answers, admit, called with the Links locked, says whether the
// connection is forwarded and under which key it is tracked (track
// false: it is not, and no Drop closes it); a connection it refuses, or
// whose dial failed, is closed.
func (l *Links[K]) Forward(c net.Conn, addr string, head []byte, admit func() (key K, track, ok bool)) {
	up, err := net.Dial("tcp", addr)
	l.Lock()
	var key K
	track, ok := false, false
	if err == nil {
		key, track, ok = admit()
	}
	if !ok {
		l.Unlock()
		c.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	if track {
		if l.conns == nil {
			l.conns = map[net.Conn]K{}
		}
		l.conns[c], l.conns[up] = key, key
	}
	l.Unlock()
	if len(head) > 0 {
		if _, err := up.Write(head); err != nil {
			c.Close()
			up.Close()
			return
		}
	}
	l.wg.Add(2)
	go l.pipe(c, up)
	go l.pipe(up, c)
}

func (l *Links[K]) pipe(dst, src net.Conn) {
	defer l.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	l.Lock()
	delete(l.conns, dst)
	delete(l.conns, src)
	l.Unlock()
}

// Drop closes the tracked connections whose key cut matches. The Links
// must be locked, so that the test can refuse such connections from now
// on (in its admit function) in the same step.
func (l *Links[K]) Drop(cut func(key K) bool) {
	for c, key := range l.conns {
		if cut(key) {
			c.Close()
		}
	}
}

// Close closes the links and every connection they forward, and waits
// until their goroutines have ended.
func (l *Links[K]) Close() {
	l.Lock()
	for _, ln := range l.lns {
		ln.Close()
	}
	for c := range l.conns {
		c.Close()
	}
	l.Unlock()
	l.wg.Wait()
}

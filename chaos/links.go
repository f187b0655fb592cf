package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// links are the TCP forwarders that carry the traffic between the
// members of one configuration (and, where the members tell clients
// their peers' addresses, the clients' traffic too). Each connection
// learns who dialed it; while a member is cut off, every member-to-member
// connection from or to it stalls — nothing is read from either end, as
// when a partition drops every packet and TCP waits to retransmit — and
// new ones stall before they reach the member. Clients' connections never
// stall. The heal lets everything held through, in order.
//
// Toxiproxy cannot do this: its toxics act on every connection of a
// proxy, and a member and a client that reach a member at the same
// address are told apart only by their source address or by what they
// send first.
type links struct {
	mu    sync.Mutex
	cut   map[string]bool // the members cut off, by key
	wake  chan struct{}   // closed and replaced when cut changes or the links close
	done  bool
	lns   []net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newLinks() *links {
	return &links{cut: map[string]bool{}, wake: make(chan struct{}), conns: map[net.Conn]struct{}{}}
}

// A classifier tells who dialed a connection: the key of the member it
// comes from ("" if unknown), whether it is a member's at all (false: a
// client's), and the bytes it read to find out, which are forwarded
// first.
type classifier func(c net.Conn) (from string, member bool, head []byte, err error)

// fromMember classifies every connection as one from the member key.
func fromMember(key string) classifier {
	return func(net.Conn) (string, bool, []byte, error) { return key, true, nil, nil }
}

// bySource classifies a connection by its source address: members dial
// from addresses of their own (keys maps them to the members' keys);
// any other source is a client.
func bySource(keys map[string]string) classifier {
	return func(c net.Conn) (string, bool, []byte, error) {
		host, _, err := net.SplitHostPort(c.RemoteAddr().String())
		if err != nil {
			return "", false, nil, err
		}
		key, ok := keys[host]
		return key, ok, nil, nil
	}
}

// byHeader classifies a member's HTTP connection by a header of its first
// request, which names the member that sends it; every connection is a
// member's.
func byHeader(name string) classifier {
	return func(c net.Conn) (string, bool, []byte, error) {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		defer c.SetReadDeadline(time.Time{})
		var head bytes.Buffer
		r := textproto.NewReader(bufio.NewReader(io.TeeReader(io.LimitReader(c, 64<<10), &head)))
		if _, err := r.ReadLine(); err != nil {
			return "", true, head.Bytes(), nil
		}
		h, err := r.ReadMIMEHeader()
		if err != nil {
			return "", true, head.Bytes(), nil
		}
		// The bufio.Reader may have read past the header: head holds all
		// that was read from c, and all of it is forwarded.
		return h.Get(name), true, head.Bytes(), nil
	}
}

// link starts a forwarder to the member to (its key) at upstream, whose
// connections classify tells apart, and returns its address.
func (l *links) link(to string, upstream string, classify classifier) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("link to %s: %w", to, err)
	}
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		ln.Close()
		return "", errors.New("the links are closed")
	}
	l.lns = append(l.lns, ln)
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.wg.Add(1)
			go l.serve(c, to, upstream, classify)
		}
	}()
	return ln.Addr().String(), nil
}

// track registers c for close; false if the links are closed.
func (l *links) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *links) forget(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		delete(l.conns, c)
		c.Close()
	}
}

func (l *links) serve(c net.Conn, to, upstream string, classify classifier) {
	defer l.wg.Done()
	if !l.track(c) {
		return
	}
	from, member, head, err := classify(c)
	if err != nil {
		l.forget(c)
		return
	}
	// A member cut off is not reached: the connection waits for the heal.
	if !l.open(from, to, member) {
		l.forget(c)
		return
	}
	up, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		l.forget(c)
		return
	}
	if !l.track(up) {
		l.forget(c)
		return
	}
	if len(head) > 0 {
		if _, err := up.Write(head); err != nil {
			l.forget(c, up)
			return
		}
	}
	var once sync.Once
	end := func() { once.Do(func() { l.forget(c, up) }) }
	l.wg.Add(2)
	go l.pipe(up, c, from, to, member, end)
	go l.pipe(c, up, from, to, member, end)
}

// pipe copies src to dst, holding what it read while the link is cut;
// an end of src too reaches dst only once the link is open.
func (l *links) pipe(dst, src net.Conn, from, to string, member bool, end func()) {
	defer l.wg.Done()
	defer end()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !l.open(from, to, member) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// open waits until a connection from from to to may carry data: at
// once for a client's, else once neither member is cut off. It is false
// once the links are closed.
func (l *links) open(from, to string, member bool) bool {
	for {
		l.mu.Lock()
		done, cut, wake := l.done, member && (l.cut[from] || l.cut[to]), l.wake
		l.mu.Unlock()
		switch {
		case done:
			return false
		case !cut:
			return true
		}
		<-wake
	}
}

// isolate cuts a member off from every other member, both ways, and
// returns the heal. A member may have several keys (the one its links
// lead to, the one its connections are known by): keys are all of them.
func (l *links) isolate(keys ...string) func() error {
	l.set(keys, true)
	return func() error { l.set(keys, false); return nil }
}

func (l *links) set(keys []string, cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range keys {
		if cut {
			l.cut[key] = true
		} else {
			delete(l.cut, key)
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// close stops every forwarder and closes every connection.
func (l *links) close() {
	l.mu.Lock()
	l.done = true
	close(l.wake)
	l.wake = make(chan struct{})
	for _, ln := range l.lns {
		ln.Close()
	}
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// zkPeer classifies the connections of the link from ZooKeeper server
// from to server to: all are from's. A server that dials another's
// election port first sends its id and its own election address, and
// the server with the larger id closes such a connection and dials that
// address itself: the address is rewritten to the link the other way
// (reverse(to, from, address); "" leaves it), so that the connection
// back goes through a link too.
func zkPeer(from, to string, reverse func(from, to, upstream string) string) classifier {
	return func(c net.Conn) (string, bool, []byte, error) {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		defer c.SetReadDeadline(time.Time{})
		head := make([]byte, 8)
		if _, err := io.ReadFull(c, head); err != nil {
			return "", false, nil, err
		}
		// The election handshake's protocol versions; a quorum
		// connection starts with a packet's type instead.
		if v := int64(binary.BigEndian.Uint64(head)); v != -65536 && v != -65535 {
			return from, true, head, nil
		}
		idLen := make([]byte, 12) // the server's id, the address's length
		if _, err := io.ReadFull(c, idLen); err != nil {
			return "", false, nil, err
		}
		n := binary.BigEndian.Uint32(idLen[8:])
		if n > 4096 {
			return "", false, nil, fmt.Errorf("election handshake with an address of %d bytes", n)
		}
		addr := make([]byte, n)
		if _, err := io.ReadFull(c, addr); err != nil {
			return "", false, nil, err
		}
		// Several addresses are separated by |.
		parts := strings.Split(string(addr), "|")
		for i, p := range parts {
			if a := reverse(to, from, p); a != "" {
				parts[i] = a
			}
		}
		rewritten := strings.Join(parts, "|")
		head = append(head, idLen[:8]...)
		head = binary.BigEndian.AppendUint32(head, uint32(len(rewritten)))
		return from, true, append(head, rewritten...), nil
	}
}

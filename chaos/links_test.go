package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer echoes every connection back until the test ends, and
// records the first bytes of each on firsts.
func echoServer(t *testing.T) (string, chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	firsts := make(chan []byte, 16)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				firsts <- append([]byte(nil), buf[:n]...)
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), firsts
}

// roundTrip writes msg on c and reports whether it came back within d.
func roundTrip(t *testing.T, c net.Conn, msg string, d time.Duration) bool {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	return echoed(c, msg, d)
}

func echoed(c net.Conn, msg string, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return err == nil && string(buf) == msg
}

func dial(t *testing.T, addr string, from string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// linkedEcho starts links (closed when the test ends) with one link, to
// the member to at an echo server, whose connections classify tells
// apart, and returns them, the link's address and what the echo server
// reads first on each connection.
func linkedEcho(t *testing.T, to string, classify classifier) (*links, string, chan []byte) {
	t.Helper()
	up, firsts := echoServer(t)
	l := newLinks()
	t.Cleanup(l.close)
	addr, err := l.link(to, up, classify)
	if err != nil {
		t.Fatal(err)
	}
	return l, addr, firsts
}

// A cut stalls a member's connection both ways, and new ones too, and
// the heal lets what was held through in order; cutting another member
// changes nothing.
func TestLinksStallWhileCut(t *testing.T) {
	l, addr, _ := linkedEcho(t, "b", fromMember("a"))
	c := dial(t, addr, "")
	if !roundTrip(t, c, "one", 10*time.Second) {
		t.Fatal("no echo before the cut")
	}
	heal := l.isolate("a")
	if roundTrip(t, c, "two", 300*time.Millisecond) {
		t.Fatal("an echo through a cut link")
	}
	fresh := dial(t, addr, "")
	if roundTrip(t, fresh, "three", 300*time.Millisecond) {
		t.Fatal("an echo on a new connection through a cut link")
	}
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	if !echoed(c, "two", 10*time.Second) || !echoed(fresh, "three", 10*time.Second) {
		t.Fatal("what the cut held did not come through after the heal")
	}
	other := l.isolate("c")
	defer func() { _ = other() }()
	if !roundTrip(t, c, "four", 10*time.Second) {
		t.Fatal("cutting another member stalled the link")
	}
}

// Cutting the member a link leads to stalls the members' connections,
// known by their source address, and not the clients'.
func TestLinksBySource(t *testing.T) {
	l, addr, _ := linkedEcho(t, "primary", bySource(map[string]string{"127.0.0.2": "replica"}))
	client, replica := dial(t, addr, ""), dial(t, addr, "127.0.0.2")
	heal := l.isolate("primary")
	defer func() { _ = heal() }()
	if !roundTrip(t, client, "client", 10*time.Second) {
		t.Fatal("a client's connection stalled")
	}
	if roundTrip(t, replica, "replica", 300*time.Millisecond) {
		t.Fatal("a member's connection went through")
	}
}

// byHeader knows a connection by a header of its first request, which it
// forwards whole.
func TestLinksByHeader(t *testing.T) {
	l, addr, firsts := linkedEcho(t, "b", byHeader("X-Server-From"))
	heal := l.isolate("a")
	defer func() { _ = heal() }()
	fromA, fromC := dial(t, addr, ""), dial(t, addr, "")
	reqA := "GET /raft/stream HTTP/1.1\r\nHost: b\r\nX-Server-From: a\r\n\r\n"
	reqC := "POST /raft HTTP/1.1\r\nHost: b\r\nX-Server-From: c\r\nContent-Length: 0\r\n\r\n"
	if !roundTrip(t, fromC, reqC, 10*time.Second) {
		t.Fatal("a request from a member not cut off stalled")
	}
	if got := <-firsts; string(got) != reqC {
		t.Fatalf("upstream got %q, want the request whole", got)
	}
	if roundTrip(t, fromA, reqA, 300*time.Millisecond) {
		t.Fatal("a request from the member cut off went through")
	}
}

// zkPeer rewrites the election address a ZooKeeper server sends to the
// link the other way, and leaves other traffic alone.
func TestZKPeerRewritesTheElectionAddress(t *testing.T) {
	reverse := func(from, to, upstream string) string {
		if from == "2" && to == "1" && upstream == "127.0.0.1:3888" {
			return "127.0.0.1:40000"
		}
		return ""
	}
	_, addr, firsts := linkedEcho(t, "2", zkPeer("1", "2", reverse))
	hello := func(version int64, addr string) []byte {
		b := binary.BigEndian.AppendUint64(nil, uint64(version))
		b = binary.BigEndian.AppendUint64(b, 2)
		b = binary.BigEndian.AppendUint32(b, uint32(len(addr)))
		return append(b, addr...)
	}
	c := dial(t, addr, "")
	if _, err := c.Write(hello(-65536, "127.0.0.1:3888")); err != nil {
		t.Fatal(err)
	}
	want := hello(-65536, "127.0.0.1:40000")
	var got []byte
	for len(got) < len(want) {
		select {
		case b := <-firsts:
			got = append(got, b...)
		case <-time.After(10 * time.Second):
			t.Fatalf("upstream got %q, want %q", got, want)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("upstream got %q, want %q", got, want)
	}
	// A quorum packet starts with its type: forwarded as it is.
	q := dial(t, addr, "")
	packet := "\x00\x00\x00\x0bfollower info"
	if !roundTrip(t, q, packet, 10*time.Second) {
		t.Fatal("a quorum connection was not forwarded as it is")
	}
}

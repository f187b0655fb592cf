package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// What a Hold stream does when it ends depends on how it ended. A client
// that closes the stream, or whose process exits (its kernel closes the
// socket: FIN or RST), is done with the lock: the instance releases it at
// once. A connection the instance closes itself, because the client went
// silent (no answer to HTTP/2 pings, TCP keepalive or retransmissions
// timed out: the client's host is gone, or a partition cut it off), may
// still have a live holder on the other side that believes in the
// validity it was last sent: the instance only stops renewing, and the
// lock expires within its TTL, after that validity.
//
// connInfo records which of these happened to a connection: the
// listener wraps every connection it accepts, and the first thing that
// ends it — a read error from the peer, a timeout, or the server's own
// Close — is its end. The HTTP server learns of it only through the same
// Read or Close, so the end is recorded before any stream of the
// connection sees its context cancelled.

type connEnd uint32

const (
	connOpen connEnd = iota
	// connPeerClosed: the peer closed or reset the connection.
	connPeerClosed
	// connLocalClosed: the instance closed it (a ping timeout, idle, or
	// shutdown).
	connLocalClosed
	// connSilent: the kernel gave up on the peer (keepalive or
	// retransmission timeout).
	connSilent
)

// connInfo is what the instance knows of one client connection.
type connInfo struct {
	end     atomic.Uint32
	streams atomic.Int64

	// http1 is set once the connection served an HTTP/1.x request: it is
	// counted in open until it ends (drain.go). mu orders the two.
	http1 atomic.Bool
	mu    sync.Mutex
	open  *atomic.Int64
}

func (c *connInfo) ended(e connEnd) {
	if !c.end.CompareAndSwap(uint32(connOpen), uint32(e)) {
		return
	}
	c.mu.Lock()
	if c.http1.Load() {
		c.open.Add(-1)
	}
	c.mu.Unlock()
}

// servesHTTP1 notes that the connection serves HTTP/1.x.
func (c *connInfo) servesHTTP1() {
	if c.http1.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.http1.Load() || connEnd(c.end.Load()) != connOpen {
		return
	}
	c.http1.Store(true)
	c.open.Add(1)
}

// trackedConn records how its connection ended.
type trackedConn struct {
	net.Conn
	info *connInfo
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The HTTP server's own deadlines (it aborts a read it no
			// longer needs with one): not an end.
		case errors.Is(err, net.ErrClosed):
			c.info.ended(connLocalClosed)
		case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
			c.info.ended(connSilent)
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			c.info.ended(connPeerClosed)
		}
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.info.ended(connLocalClosed)
	return c.Conn.Close()
}

// KeepAlive is how the instance finds out that a client went silent: TCP
// keepalive probes after Idle without traffic, Count of them Interval
// apart, and unacknowledged data given up on after UserTimeout (Linux).
type KeepAlive struct {
	Idle, Interval time.Duration
	Count          int
	UserTimeout    time.Duration
}

// DefaultKeepAlive finds a silent client within about 15 s.
var DefaultKeepAlive = KeepAlive{Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 4, UserTimeout: 15 * time.Second}

// trackingListener wraps the connections it accepts.
type trackingListener struct {
	net.Listener
	ka KeepAlive
	// http1 counts the open connections that served HTTP/1.x.
	http1 atomic.Int64
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: l.ka.Idle, Interval: l.ka.Interval, Count: l.ka.Count})
		setUserTimeout(tc, l.ka.UserTimeout)
	}
	return &trackedConn{Conn: c, info: &connInfo{open: &l.http1}}, nil
}

type connKey struct{}

// connContext is the http.Server's ConnContext: every request of a
// connection carries its connInfo.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if t, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, t.info)
	}
	return ctx
}

func connOf(ctx context.Context) *connInfo {
	c, _ := ctx.Value(connKey{}).(*connInfo)
	return c
}

// enterStream counts a stream against its connection's limit.
func enterStream(ctx context.Context, limit int) (leave func(), err error) {
	c := connOf(ctx)
	if c == nil {
		return func() {}, nil
	}
	if n := c.streams.Add(1); n > int64(limit) {
		c.streams.Add(-1)
		return nil, fmt.Errorf("%w: the connection has %d streams open, the limit (--max-streams-per-conn)", errTooManyStreams, limit)
	}
	return func() { c.streams.Add(-1) }, nil
}

// clientClosed reports whether a stream whose context ended was ended by
// its client: the connection is still open (the client cancelled the
// stream alone), or the client closed it. Without a tracked connection
// (a handler served outside Serve) the client is taken to have closed it.
func clientClosed(ctx context.Context) bool {
	c := connOf(ctx)
	if c == nil {
		return true
	}
	e := connEnd(c.end.Load())
	return e == connOpen || e == connPeerClosed
}

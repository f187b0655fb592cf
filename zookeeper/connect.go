package zookeeper

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"
)

type zkLogger struct {
	l *slog.Logger
	t *connTracker
}

func (z zkLogger) Printf(format string, a ...any) {
	if strings.HasPrefix(format, "authentication failed") || strings.HasPrefix(format, "failed to connect") {
		// The server hung up on the connect request, or the dial failed.
		msg := fmt.Sprintf(format, a...)
		z.t.failed(errors.New(msg), tlsRefusal(msg))
	}
	if z.l != nil {
		z.l.Debug(fmt.Sprintf(format, a...), "component", "zookeeper")
	}
}

// refusalsToGiveUp is how many connection attempts in a row (and at
// least one per server) must end in a TLS refusal for Dial to give up.
const refusalsToGiveUp = 3

// connTracker remembers why the client's connection attempts failed, so
// that Dial can say why it has no session, and gives up when TLS refuses
// every attempt: a certificate that does not verify will not start to.
// It also keeps the session timeout the servers granted, which the
// client reads from each connect response and keeps to itself.
type connTracker struct {
	servers   int
	handshake time.Duration // how long a server may take to answer the connect request
	logger    *slog.Logger  // or nil
	granted   atomic.Int64  // the session timeout of the last connect response, in ns; 0 before the first

	mu      sync.Mutex
	last    error // of the last failed attempt
	refused int   // attempts in a row ended by a TLS refusal
	giveUp  chan struct{}
	closed  bool
}

func newConnTracker(servers int, handshake time.Duration, logger *slog.Logger) *connTracker {
	return &connTracker{servers: servers, handshake: handshake, logger: logger, giveUp: make(chan struct{})}
}

// handshakeBound is how long one server may take to answer the connect
// request before the client tries the next one: a share of the shorter
// of the session and dial timeouts (the Java client's connect timeout is
// the session timeout over the number of servers), so that every server
// gets its turn within each, but at least a second. The client itself
// would wait 6.7 session timeouts for a server that accepted the
// connection and never answers.
func handshakeBound(session, dial time.Duration, servers int) time.Duration {
	return max(min(session, dial)/time.Duration(max(servers, 1)), time.Second)
}

// grant records the session timeout of a connect response. A server may
// grant less than was asked (its maxSessionTimeout), and a reconnection
// may grant less than the connection before it.
func (t *connTracker) grant(d time.Duration) {
	prev := time.Duration(t.granted.Swap(int64(d)))
	if prev != 0 && d < prev && t.logger != nil {
		t.logger.Warn("zookeeper: a reconnection shortened the session; locks held for longer TTLs are given up at their next renewal",
			"was", prev, "now", d)
	}
}

// grantedTimeout is the session timeout of the last connect response,
// or 0 before the first.
func (t *connTracker) grantedTimeout() time.Duration { return time.Duration(t.granted.Load()) }

// failed records a failed attempt; refusal says TLS refused it.
func (t *connTracker) failed(err error, refusal bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = err
	if !refusal {
		t.refused = 0
		return
	}
	t.refused++
	if t.refused >= max(refusalsToGiveUp, t.servers) && !t.closed {
		t.closed = true
		close(t.giveUp)
	}
}

// connected forgets the failures: the client has a session.
func (t *connTracker) connected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last, t.refused = nil, 0
}

func (t *connTracker) lastErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// dialer is the client's dialer: plain TCP for a nil cfg, else TLS with
// cfg, each connection a handshakeConn.
func (t *connTracker) dialer(cfg *tls.Config) zk.Dialer {
	dial := t.dial(cfg)
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := dial(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &handshakeConn{Conn: conn, t: t, until: time.Now().Add(t.handshake)}, nil
	}
}

func (t *connTracker) dial(cfg *tls.Config) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		if cfg == nil {
			return net.DialTimeout(network, address, timeout)
		}
		c := cfg.Clone()
		if c.ServerName == "" {
			if host, _, err := net.SplitHostPort(address); err == nil {
				c.ServerName = host
			}
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, c)
		if err != nil && !strings.Contains(err.Error(), "tls: ") {
			err = fmt.Errorf("TLS handshake: %w", err)
		}
		if err != nil {
			return nil, err // the client logs it, and zkLogger records it
		}
		return conn, nil
	}
}

// connectHead is how many bytes of a server's first frame, its connect
// response, say what the session is: the frame's length, the protocol
// version, the session timeout granted and the session id.
const connectHead = 4 + 4 + 4 + 8

// handshakeConn is a connection to a server as the client sees it. It
// reads the session timeout granted from the connect response as the
// response goes by, and holds every read deadline to its handshake
// bound until that response is in.
type handshakeConn struct {
	net.Conn
	t     *connTracker
	until time.Time // the connect response is due by then
	// head is the start of the connect response, read by the client's
	// connection goroutine alone, and then by its receive goroutine,
	// which it starts after the response is in.
	head []byte
	done atomic.Bool // the connect response is in
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.done.Load() {
		c.head = append(c.head, p[:min(n, connectHead-len(c.head))]...)
		if len(c.head) == connectHead {
			c.done.Store(true)
			// A session id of 0 means the session expired: the timeout
			// means nothing then.
			if binary.BigEndian.Uint64(c.head[12:]) != 0 {
				c.t.grant(time.Duration(int32(binary.BigEndian.Uint32(c.head[8:]))) * time.Millisecond)
			}
		}
	}
	return n, err
}

func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	if !c.done.Load() && (t.IsZero() || t.After(c.until)) {
		t = c.until
	}
	return c.Conn.SetReadDeadline(t)
}

// tlsRefusal says whether the message of a failed connection attempt is
// a server certificate that does not verify or a TLS alert from the
// server: neither goes away by trying again.
func tlsRefusal(msg string) bool {
	return strings.Contains(msg, "tls: failed to verify certificate") || strings.Contains(msg, "x509: ") ||
		strings.Contains(msg, "remote error: tls:")
}

// noSession is the error of a Dial without a session: cause, then what
// the last attempt said, with a hint at what TLS may need.
func noSession(servers string, tlsCfg *tls.Config, cause, last error) error {
	err := fmt.Errorf("zookeeper: no session with %s: %w", servers, cause)
	if last == nil {
		return err
	}
	msg := last.Error()
	hungUp := strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe")
	hint := ""
	switch {
	case tlsCfg == nil && hungUp:
		hint = " (is ZooKeeper expecting TLS on this port? its secureClientPort takes TLS: add ca_file=… or tls=on to the URL)"
	case tlsCfg != nil && len(tlsCfg.Certificates) == 0 && (strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate")):
		hint = " (does ZooKeeper want a client certificate? add cert_file=… and key_file=… to the URL)"
	case tlsCfg != nil && hungUp:
		hint = " (is this ZooKeeper's secureClientPort? its plain clientPort does not speak TLS)"
	}
	return fmt.Errorf("%w; last connection error: %v%s", err, last, hint)
}

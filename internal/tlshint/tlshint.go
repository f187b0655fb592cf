// Package tlshint makes the errors of a TLS mismatch say what is wrong.
// A client and a server that disagree about TLS rarely get a clear
// error from the network: a plain-text client of a TLS port sees its
// connection reset, a TLS client of a plain-text server waits for an
// answer that never comes, and a client without the certificate a
// server requires (TLS 1.3) learns it only from a reset after the
// handshake. Dial and Plain add to such errors what the user should
// check.
package tlshint

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
)

// Dial connects to addr with d and does the TLS handshake of cfg, within
// d's timeout and deadline and ctx. cfg's ServerName defaults to the
// host of addr. Its errors name addr and the handshake; plain is what
// to try when the server turns out to speak plain text, such as "use
// redis:// without TLS parameters".
//
// When the server asks for a client certificate and cfg has none, the
// connection's later read and write errors say so: under TLS 1.3 a
// server that requires one refuses it only after the handshake.
func Dial(ctx context.Context, d *net.Dialer, addr string, cfg *tls.Config, plain string) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	if !d.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Deadline)
		defer cancel()
	}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := cfg.Clone()
	if c == nil {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		c.ServerName = host
	}
	var asked atomic.Bool
	if len(c.Certificates) == 0 && c.GetClientCertificate == nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			asked.Store(true)
			return &tls.Certificate{}, nil // none, as without the hook
		}
	}
	conn := tls.Client(raw, c)
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, handshakeError(addr, err, asked.Load(), plain)
	}
	if asked.Load() {
		return &noCertConn{Conn: conn}, nil
	}
	return conn, nil
}

// noCertHint is what a connection says when the server asked for a
// client certificate and got none.
const noCertHint = "the server asked for a client certificate and none was given: set cert_file and key_file"

// handshakeError says what a failed handshake with addr means.
func handshakeError(addr string, err error, asked bool, plain string) error {
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &rh):
		return fmt.Errorf("TLS handshake with %s: %w (the server does not speak TLS: %s)", addr, err, plain)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Errorf("TLS handshake with %s: %w (no TLS answer: is the server speaking plain text? then %s)", addr, err, plain)
	case asked && closed(err):
		return fmt.Errorf("TLS handshake with %s: %w (%s)", addr, err, noCertHint)
	case closed(err):
		return fmt.Errorf("TLS handshake with %s: %w (the server closed the connection: is it speaking TLS? if not, %s)", addr, err, plain)
	}
	return fmt.Errorf("TLS handshake with %s: %w", addr, err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// closed reports whether err means the peer closed or reset the
// connection, or ended it with a TLS alert.
func closed(err error) bool {
	var op *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &op) && op.Op == "remote error" // crypto/tls's alerts from the peer
}

// noCertConn is a connection to a server that asked for a client
// certificate and got none.
type noCertConn struct {
	net.Conn
	hinted atomic.Bool
}

func (c *noCertConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	return n, c.hint(err)
}

func (c *noCertConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	return n, c.hint(err)
}

// hint adds noCertHint to the first error that says the server ended
// the connection.
func (c *noCertConn) hint(err error) error {
	if err == nil || !closed(err) || c.hinted.Swap(true) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, noCertHint)
}

// Closed reports whether err, or one of the errors it joins, says that
// the peer reset or closed the connection, or ended it with a TLS alert.
func Closed(err error) bool { return err != nil && closed(err) }

// Plain adds how to a connection error of a plain-text client when it
// looks like the server expects TLS (it reset or closed the connection
// at once), such as "is the server expecting TLS? use rediss://"; other
// errors it returns as they are.
func Plain(err error, how string) error {
	if err == nil || !closed(err) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, how)
}

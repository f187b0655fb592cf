package tlshint

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// listen serves every connection of a loopback listener with serve,
// until the test ends.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return l.Addr().String()
}

func wantIn(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

// TestDialPlainServer: a server that does not answer the handshake, and
// one that answers in plain text, are said to be plain text.
func TestDialPlainServer(t *testing.T) {
	certs := testcerts.New(t)
	cfg, err := certs.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	silent := listen(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	_, err = Dial(context.Background(), &net.Dialer{Timeout: 300 * time.Millisecond}, silent, cfg, "use plain")
	wantIn(t, err, "TLS handshake with "+silent, "plain text", "use plain")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error is no timeout: %v", err)
	}

	talker := listen(t, func(c net.Conn) { _, _ = io.WriteString(c, "-ERR unknown command\r\n") })
	_, err = Dial(context.Background(), &net.Dialer{Timeout: 5 * time.Second}, talker, cfg, "use plain")
	wantIn(t, err, "does not speak TLS", "use plain")
}

// TestDialNoClientCert: a server that requires a client certificate
// from a client that has none: the error, at the handshake (TLS 1.2) or
// at the first read (TLS 1.3), says to set one.
func TestDialNoClientCert(t *testing.T) {
	certs := testcerts.New(t)
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		srv, err := certs.ServerConfig(true)
		if err != nil {
			t.Fatal(err)
		}
		srv.MaxVersion = v
		addr := listen(t, func(c net.Conn) {
			tc := tls.Server(c, srv)
			if tc.Handshake() == nil {
				_, _ = io.Copy(io.Discard, tc)
			}
		})
		cfg, err := certs.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = nil
		conn, err := Dial(context.Background(), &net.Dialer{Timeout: 5 * time.Second}, addr, cfg, "use plain")
		if err == nil {
			_, _ = conn.Write([]byte("PING\r\n"))
			_, err = conn.Read(make([]byte, 1))
			_ = conn.Close()
		}
		wantIn(t, err, "client certificate", "cert_file")
	}
}

// TestDialGood: the handshake verifies the server under the dialled host
// and the connection works.
func TestDialGood(t *testing.T) {
	certs := testcerts.New(t)
	srv, err := certs.ServerConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	addr := listen(t, func(c net.Conn) { _, _ = io.Copy(c, tls.Server(c, srv)) })
	cfg, err := certs.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(context.Background(), &net.Dialer{Timeout: 5 * time.Second}, addr, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if cfg.ServerName != "" {
		t.Errorf("Dial changed the caller's configuration: ServerName %q", cfg.ServerName)
	}
	cfg.ServerName = "elsewhere.example"
	_, err = Dial(context.Background(), &net.Dialer{Timeout: 5 * time.Second}, addr, cfg, "")
	wantIn(t, err, "elsewhere.example", "x509")
}

// TestPlain: a reset or a closed connection gets the hint; other errors
// are left as they are.
func TestPlain(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	wantIn(t, Plain(reset, "use TLS"), "connection reset", "(use TLS)")
	if err := Plain(reset, "x"); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Plain dropped the cause: %v", err)
	}
	wantIn(t, Plain(io.EOF, "use TLS"), "(use TLS)")
	other := errors.New("connection refused")
	if err := Plain(other, "use TLS"); err != other {
		t.Errorf("Plain(%v) = %v", other, err)
	}
	if Plain(nil, "x") != nil {
		t.Error("Plain(nil) != nil")
	}
	if !Closed(errors.Join(other, reset)) || Closed(other) || Closed(nil) {
		t.Error("Closed does not see a reset among joined errors, or sees one elsewhere")
	}
}

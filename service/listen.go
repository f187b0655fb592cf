package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// ErrExposed: the instance would listen beyond this host with neither
// TLS nor tokens, so that anyone who can reach it could take and release
// every lock.
var ErrExposed = errors.New("refusing to serve locks to the network without TLS or tokens")

// CheckExposure refuses to listen on addr when it is not a loopback
// address and the instance has neither TLS nor tokens, unless insecure.
func CheckExposure(addr string, withTLS, withTokens, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: want host:port, e.g. 127.0.0.1:7070 or :7070", addr)
	}
	if withTLS || withTokens || insecure || loopback(host) {
		return nil
	}
	where := host
	if where == "" {
		where = "every interface"
	}
	return fmt.Errorf("%w: %s is reachable from other hosts; give --cert-file and --key-file, or --tokens, or --insecure to do it anyway", ErrExposed, where)
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Listen listens on addr, TCP, and tracks how each connection ends
// (conn.go).
func Listen(ctx context.Context, addr string, ka KeepAlive) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &trackingListener{Listener: ln, ka: ka}, nil
}

// TLSFiles are the files of the instance's TLS: its certificate and key,
// and the authorities whose client certificates it requires (none: no
// client certificate is asked for).
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
}

// certs holds the instance's certificate, replaced on reload.
type certs struct {
	files TLSFiles
	cert  atomic.Pointer[tls.Certificate]
}

// ServerTLS reads files into a TLS configuration whose certificate Reload
// replaces (a certificate renewed in place, on SIGHUP). Its errors name
// the file and never quote a key.
func ServerTLS(files TLSFiles) (*tls.Config, func() error, error) {
	switch {
	case files.CertFile == "" && files.KeyFile == "":
		if files.ClientCAFile != "" {
			return nil, nil, errors.New("--ca-file without --cert-file and --key-file: client certificates need TLS")
		}
		return nil, nil, nil
	case files.CertFile == "" || files.KeyFile == "":
		return nil, nil, errors.New("--cert-file and --key-file go together: the certificate and its private key")
	}
	c := &certs{files: files}
	if err := c.load(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.cert.Load(), nil },
		NextProtos:     []string{"h2", "http/1.1"},
	}
	if files.ClientCAFile != "" {
		pool, err := storeurl.ReadCAs(files.ClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--ca-file %s: %w", files.ClientCAFile, err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, c.load, nil
}

func (c *certs) load() error {
	pair, err := tls.LoadX509KeyPair(c.files.CertFile, c.files.KeyFile)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("--cert-file %s, --key-file %s: %s: %w", c.files.CertFile, c.files.KeyFile, pe.Path, pe.Err)
		}
		return fmt.Errorf("--cert-file %s, --key-file %s: %w", c.files.CertFile, c.files.KeyFile, err)
	}
	c.cert.Store(&pair)
	return nil
}

// ServeOptions are how Serve serves.
type ServeOptions struct {
	// TLS, if set, is the TLS configuration (ServerTLS); nil serves
	// HTTP/1.1 and HTTP/2 without TLS (h2c).
	TLS *tls.Config
	// DrainTimeout bounds how long streams and calls in progress get to
	// end once draining starts. Default 30s.
	DrainTimeout time.Duration
	// Extra, if set, serves paths of its own beside the API (/metrics).
	Extra map[string]http.Handler
	// PingEvery and PingTimeout find a silent HTTP/2 client: a
	// connection that brought nothing for PingEvery is pinged, and closed
	// when the ping goes unanswered for PingTimeout. Defaults 5s and 10s.
	PingEvery, PingTimeout time.Duration
	// HTTP1Grace bounds how long draining waits for HTTP/1.x clients to
	// close their connections (drain.go), within DrainTimeout. Default
	// DefaultHTTP1Grace.
	HTTP1Grace time.Duration
}

// Defaults of ServeOptions.
const (
	DefaultPingEvery   = 5 * time.Second
	DefaultPingTimeout = 10 * time.Second
)

// Serve serves the instance's API on ln until ctx is done, then drains:
// new calls are refused (DRAINING), streams that hold leases stop
// renewing them and say so, HTTP/1.x clients get up to HTTP1Grace to
// close their connections (drain.go), and the server stops accepting
// connections and waits, within DrainTimeout in all, for calls in
// progress.
func (s *Server) Serve(ctx context.Context, ln net.Listener, o ServeOptions) error {
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.PingEvery <= 0 {
		o.PingEvery = DefaultPingEvery
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = DefaultPingTimeout
	}
	if o.HTTP1Grace <= 0 {
		o.HTTP1Grace = DefaultHTTP1Grace
	}
	handler := s.Handler()
	if len(o.Extra) > 0 {
		mux := http.NewServeMux()
		for p, h := range o.Extra {
			mux.Handle(p, h)
		}
		mux.Handle("/", handler)
		handler = mux
	}
	handler = s.http1Conns(handler)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if o.TLS != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Handler:           handler,
		ConnContext:       connContext,
		Protocols:         &protocols,
		TLSConfig:         o.TLS,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: s.cfg.MaxStreamsPerConn + 100,
			SendPingTimeout:      o.PingEvery,
			PingTimeout:          o.PingTimeout,
		},
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() {
		var err error
		if o.TLS != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		served <- err
	}()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	s.Drain()
	start := time.Now()
	awaitHTTP1(ln, min(o.HTTP1Grace, o.DrainTimeout))
	sctx, cancel := context.WithTimeout(context.Background(), o.DrainTimeout-time.Since(start))
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		_ = srv.Close()
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("drain: calls still in progress after %v were cut off", o.DrainTimeout)
	}
	return err
}

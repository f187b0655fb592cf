package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/metrics"
	"github.com/turnstilelock/turnstile/service/dashboard"
)

// RunOptions are what "turnstile serve" runs.
type RunOptions struct {
	// Backend is the store's URL; empty: mem://, one instance only.
	Backend string
	// Listen is the address to serve on, host:port.
	Listen string
	TLS    TLSFiles
	// TokensFile, if set, is the tokens file (tokens.go), read again on
	// SIGHUP.
	TokensFile string
	// Insecure allows serving a non-loopback address without TLS or
	// tokens.
	Insecure bool
	// MetricsAddr, if set, serves Prometheus metrics there; "same"
	// serves them at /metrics of Listen.
	MetricsAddr string
	// NoDashboard leaves the operator page (package dashboard) out of /.
	NoDashboard bool
	// PageOnly serves the operator page and the API's reads, and refuses
	// every call that takes, renews or releases a lock ("turnstile
	// dashboard").
	PageOnly     bool
	DrainTimeout time.Duration
	// OpenTimeout bounds connecting to the store at start. Default 10s.
	OpenTimeout time.Duration
	Config      Config // all but Backend, Tokens and Registerer
	// Listening, if set, is told the address once the instance serves.
	Listening func(net.Addr)
	// Logger gets the instance's log; default: text on stderr.
	Logger *slog.Logger
}

// Errors of Run, for the command's exit status.
var (
	// ErrUsage: the options cannot work (a file that cannot be read, an
	// address that cannot be listened on, an exposure refused).
	ErrUsage = errors.New("usage")
	// ErrStore: the store cannot be opened or reached.
	ErrStore = errors.New("lock store unavailable")
)

// runError is an error of Run of one of the kinds above, with the
// message of what went wrong alone.
type runError struct{ kind, err error }

func (e *runError) Error() string   { return e.err.Error() }
func (e *runError) Unwrap() []error { return []error{e.kind, e.err} }

func usage(format string, args ...any) error {
	return &runError{kind: ErrUsage, err: fmt.Errorf(format, args...)}
}

// Run serves the lock service until ctx is done, then drains and
// returns. It reads the tokens file and the certificate again on SIGHUP.
// What it has to say goes to stderr, never a token or a URL's secret.
func Run(ctx context.Context, o RunOptions, stderr io.Writer) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	tlsCfg, reloadCert, err := ServerTLS(o.TLS)
	if err != nil {
		return usage("%w", err)
	}
	var tokens *TokenSet
	if o.TokensFile != "" {
		if tokens, err = ReadTokensFile(o.TokensFile); err != nil {
			return usage("--tokens %w", err)
		}
	}
	if err := CheckExposure(o.Listen, tlsCfg != nil, tokens != nil, o.Insecure); err != nil {
		return usage("%w", err)
	}
	ln, err := Listen(ctx, o.Listen, DefaultKeepAlive)
	if err != nil {
		return usage("--listen %s: %w", o.Listen, unwrapOp(err))
	}
	defer ln.Close()

	url := o.Backend
	if url == "" {
		url = "mem://"
		fmt.Fprintln(stderr, "turnstile serve: no --backend: serving the in-process store mem://, which only this one instance sees. Run several instances over a shared store (--backend redis://…, etcd://…) to scale out.")
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return err
	}
	lib, err := metrics.New(reg)
	if err != nil {
		return err
	}
	timeout := o.OpenTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	octx, cancel := context.WithTimeout(ctx, timeout)
	store, err := turnstile.Open(octx, url, turnstile.WithObserver(lib))
	cancel()
	if err != nil {
		if errors.Is(err, turnstile.ErrUnknownScheme) || errors.Is(err, turnstile.ErrInvalidURL) || errors.Is(err, turnstile.ErrInvalidOption) {
			return usage("--backend: %w", err)
		}
		return &runError{kind: ErrStore, err: err}
	}
	defer store.Close()

	cfg := o.Config
	cfg.Backend, cfg.Tokens, cfg.Registerer, cfg.Logger = store.Backend(), tokens, reg, log
	cfg.ClientOptions = append(cfg.ClientOptions, turnstile.WithObserver(lib))
	s, err := New(cfg)
	if err != nil {
		return usage("%w", err)
	}
	defer s.Close()

	serveOpts := ServeOptions{TLS: tlsCfg, DrainTimeout: o.DrainTimeout}
	switch o.MetricsAddr {
	case "":
	case "same":
		serveOpts.Extra = map[string]http.Handler{metrics.Path: metrics.Handler(reg)}
	default:
		mctx, stop := context.WithCancel(context.Background())
		defer stop()
		addr, err := metrics.Serve(mctx, o.MetricsAddr, reg)
		if err != nil {
			return usage("--metrics-addr %s: %w", o.MetricsAddr, unwrapOp(err))
		}
		fmt.Fprintf(stderr, "turnstile serve: metrics on http://%s%s\n", addr, metrics.Path)
	}

	if !o.NoDashboard {
		page, err := dashboard.New(dashboard.Options{API: s.Handler(), Role: s.CallerRole, Watchers: s.KeyWatchers, Gatherer: reg})
		if err != nil {
			return err
		}
		serveOpts.Extra = page.Mount(serveOpts.Extra)
		if o.PageOnly {
			serveOpts.Extra = dashboard.RefuseLockCalls(serveOpts.Extra)
		}
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reload(ctx, hup, s, o.TokensFile, reloadCert, log)

	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	fmt.Fprintf(stderr, "turnstile serve: serving %s (gRPC, gRPC-Web, Connect) on %s://%s\n", driverName(store), scheme, ln.Addr())
	if !o.NoDashboard {
		fmt.Fprintf(stderr, "turnstile serve: operator page on %s://%s/\n", scheme, ln.Addr())
	}
	if o.Listening != nil {
		o.Listening(ln.Addr())
	}
	err = s.Serve(ctx, ln, serveOpts)
	fmt.Fprintf(stderr, "turnstile serve: drained; %d streams held leases at the end\n", s.Holds())
	return err
}

// reload reads the tokens file and the certificate again on each signal,
// keeping what it had when the new one is wrong.
func reload(ctx context.Context, hup <-chan os.Signal, s *Server, tokensFile string, reloadCert func() error, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		if tokensFile != "" {
			ts, err := ReadTokensFile(tokensFile)
			if err != nil {
				log.Error("turnstile serve: SIGHUP: the tokens file is wrong; the tokens read before stay in force", "err", err)
			} else {
				s.SetTokens(ts)
				log.Info("turnstile serve: SIGHUP: tokens read again", "file", tokensFile, "tokens", ts.Len())
			}
		}
		if reloadCert != nil {
			if err := reloadCert(); err != nil {
				log.Error("turnstile serve: SIGHUP: the certificate cannot be read; the one read before stays in force", "err", err)
			} else {
				log.Info("turnstile serve: SIGHUP: certificate read again")
			}
		}
	}
}

func driverName(c *turnstile.Client) string { return driver.Name(c.Backend()) }

// unwrapOp drops the net.OpError around a listen error, which repeats the
// address the message names already.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err
	}
	return err
}

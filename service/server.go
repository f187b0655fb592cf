package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
	"github.com/turnstilelock/turnstile/service/gen/turnstile/v1/turnstilev1connect"
)

// Defaults of a Config.
const (
	DefaultTTL     = turnstile.DefaultTTL
	DefaultMaxWait = 5 * time.Minute
	// DefaultMaxStreamsPerConn bounds the streams (Hold, Campaign,
	// Queue, Watch, Observe) one connection may have open at once.
	DefaultMaxStreamsPerConn = 1000
	// DefaultMaxHolds bounds the Hold and Campaign streams of an
	// instance: each has a lease its watchdog renews.
	DefaultMaxHolds = 100_000
)

// Config is what an instance serves, and how.
type Config struct {
	// Backend is the lock store. The Server never closes it.
	Backend driver.Backend
	// Instance is the first part of the owner ids the instance makes
	// (1 to 64 bytes, no '/'); default: host name and process id.
	Instance string
	// TTL is the lease TTL of a request that names none. Default 30s.
	TTL time.Duration
	// MaxWait bounds every wait for a lock. Default 5m.
	MaxWait time.Duration
	// Logger receives what the instance has to say (never a token).
	// Default: nowhere.
	Logger *slog.Logger
	// Tokens, if set, are the bearer tokens the instance accepts; every
	// call then needs one. Nil: every caller may do everything.
	Tokens *TokenSet
	// Registerer, if set, gets the instance's Prometheus metrics.
	Registerer prometheus.Registerer
	// MaxStreamsPerConn and MaxHolds bound streams per connection and
	// held streams per instance (defaults above).
	MaxStreamsPerConn int
	MaxHolds          int
	// Version is what Info reports.
	Version string
	// ClientOptions are given to every Client of the instance (an
	// observer for the library's metrics, say).
	ClientOptions []turnstile.Option
}

// Server is one instance of the lock service. It keeps no state that
// another instance needs: every lease is in the store.
type Server struct {
	cfg     Config
	views   *views
	hub     *hub
	tokens  atomic.Pointer[TokenSet]
	metrics *serverMetrics
	pool    *opPool
	storeOK atomic.Bool // the store answered the last readiness probe
	probe   prober

	holds    atomic.Int64 // Hold and Campaign streams open
	held     *heldLeases  // their leases, by key (forced.go)
	draining atomic.Bool
	// drain is closed when the instance starts draining: every stream
	// that holds a lease stops renewing it and says so.
	drain     chan struct{}
	drainOnce sync.Once
	// life ends when the instance starts draining, and with it every
	// wait for a lock.
	life      context.Context
	endLife   context.CancelFunc
	closeOnce sync.Once
}

// New returns a Server over cfg.Backend.
func New(cfg Config) (*Server, error) {
	if driver.IsNil(cfg.Backend) {
		return nil, turnstile.ErrNilBackend
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < turnstile.MinTTL || cfg.TTL > turnstile.MaxTTL {
		return nil, fmt.Errorf("%w: ttl %v is not in [%v, %v]", turnstile.ErrInvalidTTL, cfg.TTL, turnstile.MinTTL, turnstile.MaxTTL)
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.MaxWait < 0 {
		return nil, fmt.Errorf("%w: max wait %v must be positive", turnstile.ErrInvalidOption, cfg.MaxWait)
	}
	if cfg.MaxStreamsPerConn == 0 {
		cfg.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if cfg.MaxHolds == 0 {
		cfg.MaxHolds = DefaultMaxHolds
	}
	if cfg.MaxStreamsPerConn < 0 || cfg.MaxHolds < 0 {
		return nil, fmt.Errorf("%w: stream limits must be positive", turnstile.ErrInvalidOption)
	}
	if cfg.Instance == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "turnstile"
		}
		cfg.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
		if len(cfg.Instance) > 64 {
			cfg.Instance = cfg.Instance[len(cfg.Instance)-64:]
		}
	}
	opts := append([]turnstile.Option{turnstile.WithInstanceID(cfg.Instance), turnstile.WithTTL(cfg.TTL), turnstile.WithLogger(cfg.Logger)}, cfg.ClientOptions...)
	// Checked here, so that a bad instance id is an error of New.
	if _, err := turnstile.New(cfg.Backend, opts...); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, views: newViews(cfg.Backend, opts), hub: newHub(), held: newHeldLeases(), drain: make(chan struct{})}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.pool = newOpPool()
	s.tokens.Store(cfg.Tokens)
	s.storeOK.Store(true)
	m, err := newServerMetrics(cfg.Registerer, s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	return s, nil
}

// SetTokens replaces the bearer tokens the instance accepts (a reload of
// the tokens file). Calls under way keep the identity they started with.
func (s *Server) SetTokens(t *TokenSet) { s.tokens.Store(t) }

// Handler returns the instance's HTTP handler: the Locks and Elections
// services (gRPC, gRPC-Web and Connect, JSON or binary), gRPC health and
// reflection, and /readyz.
func (s *Server) Handler() http.Handler {
	// Messages are a key and a few fields: compressing them costs more
	// CPU than the bytes it saves, whatever the client accepts.
	opts := connect.WithHandlerOptions(connect.WithInterceptors(s.interceptor()), connect.WithCompressMinBytes(compressAbove))
	mux := http.NewServeMux()
	mux.Handle(turnstilev1connect.NewLocksHandler(&locks{s}, opts))
	mux.Handle(turnstilev1connect.NewElectionsHandler(&elections{s}, opts))
	names := []string{turnstilev1connect.LocksName, turnstilev1connect.ElectionsName}
	mux.Handle(grpchealth.NewHandler(&health{s}))
	reflector := grpcreflect.NewStaticReflector(names...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.HandleFunc("/readyz", s.ready)
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return wholeBody(mux)
}

// compressAbove is the size above which a response is compressed for a
// client that accepts it: List's, in practice.
const compressAbove = 16 << 10

// maxRequest bounds a request's body: requests are a key and a few
// fields.
const maxRequest = 1 << 20

// wholeBody reads an HTTP/1.x request's body to its end before the
// handler runs. Only a body read to its end lets the HTTP server watch
// the connection and cancel the request's context when the client hangs
// up; a stream's handler reads only the one message it needs, and would
// not learn that its client went away until a write failed.
func wholeBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
			data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
			if err != nil {
				http.Error(w, "request body: "+err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
		}
		h.ServeHTTP(w, r)
	})
}

// Drain starts draining: new calls are refused with UNAVAILABLE, reason
// DRAINING (so that clients call another instance), /readyz says not
// ready, and every Hold and Campaign stream stops renewing its lease and
// says so with Draining, the lease in it: the lock stays held until its
// TTL runs out, or until the client resumes it on another instance.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		s.draining.Store(true)
		close(s.drain)
		s.endLife()
	})
}

// Holds returns how many Hold and Campaign streams are open.
func (s *Server) Holds() int64 { return s.holds.Load() }

// Close closes the instance's Clients. Leases still held by streams
// stop being renewed and expire after their TTL.
func (s *Server) Close() error {
	s.Drain()
	s.views.close()
	s.closeOnce.Do(s.pool.close)
	return nil
}

// check refuses calls once the instance drains.
func (s *Server) check() error {
	if s.draining.Load() {
		return errDraining
	}
	return nil
}

// ttlOf is a request's TTL, or the instance's default.
func (s *Server) ttlOf(d interface{ AsDuration() time.Duration }, set bool) (time.Duration, error) {
	if !set {
		return s.cfg.TTL, nil
	}
	ttl := d.AsDuration()
	if ttl < turnstile.MinTTL || ttl > turnstile.MaxTTL {
		return 0, fmt.Errorf("%w: %v is not in [%v, %v]", turnstile.ErrInvalidTTL, ttl, turnstile.MinTTL, turnstile.MaxTTL)
	}
	return ttl, nil
}

// errWaitOver ends a wait the request (or --max-wait) bounded.
var errWaitOver = errors.New("the wait for the lock ended")

// waitContext bounds a wait for a lock: by the request's wait if set
// (unbounded: by MaxWait unless forever), by the call's deadline, and by
// the instance's draining.
func (s *Server) waitContext(ctx context.Context, wait time.Duration, set, forever bool) (context.Context, context.CancelFunc, error) {
	if set && wait < 0 {
		return nil, nil, fmt.Errorf("%w: wait %v must not be negative", turnstile.ErrInvalidOption, wait)
	}
	wctx, cancelCause := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.life, func() { cancelCause(errDraining) })
	cancel := func() { stop(); cancelCause(nil) }
	if set || !forever {
		limit := s.cfg.MaxWait
		if set {
			limit = min(wait, limit)
		}
		var cancelTimeout context.CancelFunc
		wctx, cancelTimeout = context.WithTimeoutCause(wctx, limit, errWaitOver)
		inner := cancel
		cancel = func() { cancelTimeout(); inner() }
	}
	return wctx, cancel, nil
}

// waitError is the error of a wait that ended: NOT_ACQUIRED when the
// request's wait (or MaxWait) ended it, DRAINING when the instance
// started draining, the caller's own error when its deadline or
// cancellation did.
func waitError(ctx, wctx context.Context, err error) error {
	if ctx.Err() == nil {
		switch cause := context.Cause(wctx); {
		case errors.Is(cause, errWaitOver):
			return withReason(connect.CodeAborted, v1.ErrorReason_NOT_ACQUIRED, fmt.Errorf("%w: %w", turnstile.ErrNotAcquired, errWaitOver))
		case errors.Is(cause, errDraining):
			return errDraining
		}
	}
	return err
}

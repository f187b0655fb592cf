package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/turnstilelock/turnstile"
)

// Path is where Serve exposes the metrics.
const Path = "/metrics"

// shutdownTimeout bounds how long Serve lets scrapes in progress finish
// once its context is done.
const shutdownTimeout = 5 * time.Second

// Handler returns an http.Handler that serves the metrics of g in the
// Prometheus text format (or OpenMetrics, if the scraper asks for it).
// A nil g gives a handler that answers every request with status 500 and
// says why.
func Handler(g prometheus.Gatherer) http.Handler {
	if g == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "turnstile metrics: nil prometheus.Gatherer", http.StatusInternalServerError)
		})
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Serve listens on addr (host:port; port 0 picks a free one) and serves
// the metrics of g at /metrics until ctx is done; it then stops listening,
// lets scrapes in progress finish for up to 5 s and ends every goroutine
// it started. It returns the address it listens on once it accepts
// connections, or an error at once: ctx or g nil (matching
// turnstile.ErrInvalidOption), ctx already done, addr unusable.
func Serve(ctx context.Context, addr string, g prometheus.Gatherer) (net.Addr, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	if g == nil {
		return nil, fmt.Errorf("%w: nil prometheus.Gatherer", turnstile.ErrInvalidOption)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("metrics: serve on %q: %w", addr, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: serve on %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(g))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = ln.Close()
		}
	}()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
		<-served
	})
	return ln.Addr(), nil
}

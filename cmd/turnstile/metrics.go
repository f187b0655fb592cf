package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/metrics"
)

// errMetricsAddr marks a --metrics-addr that is not host:port.
var errMetricsAddr = errors.New("--metrics-addr wants host:port, e.g. :9100 or 127.0.0.1:0")

// checkMetricsAddr rejects a --metrics-addr that cannot be listened on,
// before anything starts.
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: %q: %v", errMetricsAddr, addr, err)
	}
	return nil
}

// serveMetrics serves the Prometheus metrics of the Clients given the
// returned option (and of this process) on addr until ctx is done, and
// says where on stderr.
func serveMetrics(ctx context.Context, addr string, stderr io.Writer) (turnstile.Option, net.Addr, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, err
	}
	m, err := metrics.New(reg)
	if err != nil {
		return nil, nil, err
	}
	bound, err := metrics.Serve(ctx, addr, reg)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	fmt.Fprintf(stderr, "turnstile: metrics on http://%s%s\n", bound, metrics.Path)
	return turnstile.WithObserver(m), bound, nil
}

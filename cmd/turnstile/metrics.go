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

// errMetricsListen marks a --metrics-addr that cannot be listened on: in
// use already, or not an address of this host. It is a usage error.
var errMetricsListen = errors.New("cannot serve metrics")

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
		// Address in use, or not one of this host's: the flag is wrong,
		// not the lock store. The net error names the address already.
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		return nil, nil, fmt.Errorf("%w: --metrics-addr %q: %v", errMetricsListen, addr, err)
	}
	fmt.Fprintf(stderr, "turnstile: metrics on http://%s%s\n", bound, metrics.Path)
	return turnstile.WithObserver(m), bound, nil
}

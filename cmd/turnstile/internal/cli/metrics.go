package cli

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

// ErrMetricsAddr marks a --metrics-addr that is not host:port.
var ErrMetricsAddr = errors.New("--metrics-addr wants host:port, e.g. :9100 or 127.0.0.1:0")

// ErrMetricsListen marks a --metrics-addr that cannot be listened on: in
// use already, or not an address of this host. It is a usage error.
var ErrMetricsListen = errors.New("cannot serve metrics")

// CheckMetricsAddr rejects a --metrics-addr that cannot be listened on,
// before anything starts.
func CheckMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: %q: %v", ErrMetricsAddr, addr, err)
	}
	return nil
}

// ServeMetrics serves the Prometheus metrics of the Clients given the
// returned option (and of this process) on addr until ctx is done, and
// says where on stderr.
func ServeMetrics(ctx context.Context, addr string, stderr io.Writer) (turnstile.Option, net.Addr, error) {
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
		return nil, nil, fmt.Errorf("%w: --metrics-addr %q: %v", ErrMetricsListen, addr, err)
	}
	fmt.Fprintf(stderr, "turnstile: metrics on http://%s%s\n", bound, metrics.Path)
	return turnstile.WithObserver(m), bound, nil
}

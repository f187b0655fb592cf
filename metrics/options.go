package metrics

import (
	"fmt"
	"math"
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstilelock/turnstile"
)

// DefaultNamespace is the first part of every metric name.
const DefaultNamespace = "turnstile"

// DefaultBuckets are the acquire-latency histogram's upper bounds, in
// seconds, from 100 µs to 1 s. The alert levels of the acquire latency
// (p50: 1 ms normal, 5 ms warning, 20 ms critical; p99: 5 ms, 20 ms,
// 100 ms) are bucket bounds, so that histogram_quantile is exact where the alerts compare.
var DefaultBuckets = []float64{
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.02, 0.05,
	0.1, 0.25, 0.5,
	1,
}

// retryBuckets are the upper bounds of the retries-per-acquisition
// histogram: the default backoff makes at most 10 retries.
var retryBuckets = []float64{0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50}

type config struct {
	namespace string
	buckets   []float64
	constant  prometheus.Labels
}

// An Option changes a setting of a Collector.
type Option func(*config) error

var nameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// WithNamespace sets the first part of every metric name. Default
// "turnstile" (DefaultNamespace); the shipped alert rules and dashboard
// use the default. It must match [a-zA-Z_][a-zA-Z0-9_]*.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		if !nameRE.MatchString(ns) {
			return fmt.Errorf("%w: metrics namespace %q must match [a-zA-Z_][a-zA-Z0-9_]*", turnstile.ErrInvalidOption, ns)
		}
		c.namespace = ns
		return nil
	}
}

// WithBuckets sets the upper bounds, in seconds, of the acquire-latency
// histogram. Default DefaultBuckets (100 µs to 1 s). They must be
// positive, finite and strictly increasing, at most 64 of them; keep
// 0.005, 0.02 and 0.1 among them for the shipped alerts to compare
// exactly.
func WithBuckets(b ...float64) Option {
	return func(c *config) error {
		if len(b) == 0 || len(b) > 64 {
			return fmt.Errorf("%w: metrics latency buckets: %d given, want 1 to 64", turnstile.ErrInvalidOption, len(b))
		}
		for i, v := range b {
			if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return fmt.Errorf("%w: metrics latency bucket %v is not a positive finite number of seconds", turnstile.ErrInvalidOption, v)
			}
			if i > 0 && v <= b[i-1] {
				return fmt.Errorf("%w: metrics latency buckets must increase strictly (%v after %v)", turnstile.ErrInvalidOption, v, b[i-1])
			}
		}
		c.buckets = slices.Clone(b)
		return nil
	}
}

// WithConstLabels adds labels with fixed values to every metric, for
// example the service's region. Default none. Names must be valid
// Prometheus label names and must not be one of the Collector's own
// labels (backend, outcome, op, name, le).
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) error {
		for k := range l {
			if !nameRE.MatchString(k) || len(k) >= 2 && k[:2] == "__" {
				return fmt.Errorf("%w: metrics constant label name %q is not a valid label name", turnstile.ErrInvalidOption, k)
			}
			switch k {
			case "backend", "outcome", "op", "name", "le":
				return fmt.Errorf("%w: metrics constant label %q is one of the Collector's own labels", turnstile.ErrInvalidOption, k)
			}
		}
		if c.constant == nil {
			c.constant = prometheus.Labels{}
		}
		for k, v := range l {
			c.constant[k] = v
		}
		return nil
	}
}

func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil metrics option", turnstile.ErrInvalidOption)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

package service

import (
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// serverMetrics are an instance's Prometheus metrics. Tenants are the
// names of the tokens file, so their number is bounded by it.
type serverMetrics struct {
	calls    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	holds    prometheus.Gauge
	waiters  prometheus.Gauge
	draining prometheus.GaugeFunc
	storeUp  prometheus.GaugeFunc
}

func newServerMetrics(reg prometheus.Registerer, s *Server) (*serverMetrics, error) {
	m := &serverMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_serve_calls_total",
			Help: "Calls the instance served, by method, status code and tenant (the token's name, - without tokens).",
		}, []string{"method", "code", "tenant"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "turnstile_serve_call_seconds",
			Help:    "How long calls took, by method: a stream's whole life for Hold, Campaign, Queue, Watch and Observe.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"method"}),
		holds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "turnstile_serve_holds",
			Help: "Hold and Campaign streams whose lease the instance renews now.",
		}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "turnstile_serve_waiters",
			Help: "Calls waiting for a lock now (Acquire, Queue, Hold, Campaign).",
		}),
		draining: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "turnstile_serve_draining",
			Help: "1 while the instance drains.",
		}, func() float64 { return b2f(s.draining.Load()) }),
		storeUp: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "turnstile_serve_store_up",
			Help: "1 if the store answered the instance's last readiness probe.",
		}, func() float64 { return b2f(s.storeOK.Load()) }),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.calls, m.latency, m.holds, m.waiters, m.draining, m.storeUp} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// call counts one call that ended with err.
func (m *serverMetrics) call(procedure, tenant string, err error, took time.Duration) {
	method := procedure[strings.LastIndexByte(procedure, '/')+1:]
	code := "ok"
	if err != nil {
		code = connect.CodeOf(toConnect(err)).String()
	}
	m.calls.WithLabelValues(method, code, tenant).Inc()
	m.latency.WithLabelValues(method).Observe(took.Seconds())
}

// waiting counts a call waiting for a lock until the returned function
// is called.
func (m *serverMetrics) waiting() func() {
	m.waiters.Inc()
	return m.waiters.Dec
}

func (m *serverMetrics) holding(d float64) { m.holds.Add(d) }

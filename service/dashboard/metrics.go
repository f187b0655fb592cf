package dashboard

import (
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Threshold is an alert rule's warning and critical level of a signal
// (deploy/prometheus/alerts.yml; a test checks they agree).
type Threshold struct {
	Warning  float64 `json:"warning"`
	Critical float64 `json:"critical"`
	// Below: the alert fires under the level, not over it.
	Below bool `json:"below,omitempty"`
}

// Thresholds are the levels the charts draw, by signal.
var Thresholds = map[string]Threshold{
	// Acquire latency p50 and p99, in seconds.
	"acquire_p50": {Warning: 0.005, Critical: 0.02},
	"acquire_p99": {Warning: 0.02, Critical: 0.1},
	// Share of acquisitions that got the lock.
	"acquire_success": {Warning: 0.9, Critical: 0.7, Below: true},
	// Leases lost while held, a minute.
	"forced_expiries_per_min": {Warning: 10, Critical: 50},
	// Share of watchdog renewals that failed.
	"renewal_failures": {Warning: 0.001, Critical: 0.01},
}

// sample is the instance's counters now: the page plots the differences
// between two samples.
type sample struct {
	TimeMillis int64 `json:"time_ms"`
	// Library metrics of the instance's Clients (package metrics).
	Acquired        float64 `json:"acquired"`
	NotAcquired     float64 `json:"not_acquired"`
	AcquireErrors   float64 `json:"acquire_errors"`
	Renewals        float64 `json:"renewals"`
	RenewalFailures float64 `json:"renewal_failures"`
	StoreErrors     float64 `json:"store_errors"`
	ForcedExpiries  float64 `json:"forced_expiries"`
	LeasesHeld      float64 `json:"leases_held"`
	// The acquire-latency histogram: upper bounds and cumulative counts.
	Buckets []float64 `json:"buckets"`
	Counts  []float64 `json:"counts"`
	// The service's own (package service).
	Holds   float64 `json:"holds"`
	Waiters float64 `json:"waiters"`
	StoreUp float64 `json:"store_up"`

	Thresholds map[string]Threshold `json:"thresholds"`
}

// metrics answers a sample of the instance's metrics to a caller who may
// read (the charts show no key).
func (p *Page) metrics(w http.ResponseWriter, r *http.Request) {
	if _, err := p.o.Role(r.Header); err != nil {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "a bearer token is needed")
		return
	}
	if p.o.Gatherer == nil {
		writeError(w, http.StatusNotFound, "not_found", "this instance keeps no metrics")
		return
	}
	families, err := p.o.Gatherer.Gather()
	if err != nil && len(families) == 0 {
		writeError(w, http.StatusInternalServerError, "internal", "the metrics could not be gathered")
		return
	}
	writeJSON(w, http.StatusOK, sampleOf(families, time.Now()))
}

func sampleOf(families []*dto.MetricFamily, now time.Time) sample {
	s := sample{TimeMillis: now.UnixMilli(), Thresholds: Thresholds, Buckets: []float64{}, Counts: []float64{}}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			outcome := label(m, "outcome")
			switch f.GetName() {
			case "turnstile_acquisitions_total":
				switch outcome {
				case "acquired":
					s.Acquired += m.GetCounter().GetValue()
				case "not_acquired":
					s.NotAcquired += m.GetCounter().GetValue()
				default:
					s.AcquireErrors += m.GetCounter().GetValue()
					s.StoreErrors += m.GetCounter().GetValue()
				}
			case "turnstile_renewals_total":
				s.Renewals += m.GetCounter().GetValue()
				if outcome != "ok" {
					s.RenewalFailures += m.GetCounter().GetValue()
				}
				if outcome == "error" {
					s.StoreErrors += m.GetCounter().GetValue()
				}
			case "turnstile_releases_total":
				if outcome == "error" {
					s.StoreErrors += m.GetCounter().GetValue()
				}
			case "turnstile_serve_calls_total":
				// TryAcquire goes to the store without the instance's
				// Clients, whose metrics count the rest.
				v := m.GetCounter().GetValue()
				switch code := label(m, "code"); {
				case label(m, "method") == "TryAcquire" && code == "ok":
					s.Acquired += v
				case label(m, "method") == "TryAcquire" && code == "aborted":
					s.NotAcquired += v
				case code == "unavailable":
					s.StoreErrors += v
				}
			case "turnstile_forced_expiries_total":
				s.ForcedExpiries += m.GetCounter().GetValue()
			case "turnstile_leases_held":
				s.LeasesHeld += m.GetGauge().GetValue()
			case "turnstile_acquire_duration_seconds":
				addHistogram(&s, m.GetHistogram())
			case "turnstile_serve_holds":
				s.Holds += m.GetGauge().GetValue()
			case "turnstile_serve_waiters":
				s.Waiters += m.GetGauge().GetValue()
			case "turnstile_serve_store_up":
				s.StoreUp = m.GetGauge().GetValue()
			}
		}
	}
	return s
}

// addHistogram adds one series of the latency histogram to the sum of
// all (every series has the same buckets).
func addHistogram(s *sample, h *dto.Histogram) {
	bs := h.GetBucket()
	if len(s.Buckets) == 0 {
		for _, b := range bs {
			s.Buckets = append(s.Buckets, b.GetUpperBound())
			s.Counts = append(s.Counts, 0)
		}
	}
	if len(bs) != len(s.Buckets) {
		return
	}
	for i, b := range bs {
		s.Counts[i] += float64(b.GetCumulativeCount())
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

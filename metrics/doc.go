// Package metrics counts turnstile's lock operations for Prometheus: the
// figures that have normal, warning and critical levels in the alert rules
// of deploy/ (acquire latency, acquire success rate, Redlock quorum success
// rate, watchdog renewal failures, forced expiries, retries per
// acquisition), and the
// leases held, the callers waiting and the state of a fallback breaker.
//
// A Collector is a turnstile.Observer: give it to turnstile.New (or to one
// call) with turnstile.WithObserver, its ObserveQuorum to
// redlock.WithQuorumObserver and its SetBreakerState to
// fallback.WithOnStateChange. New registers its metrics on the registry it
// is given; nothing is registered globally. Serve (or Handler) exposes a
// registry at /metrics.
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg)
//	c, err := turnstile.New(backend, turnstile.WithObserver(m))
//	addr, err := metrics.Serve(ctx, ":9090", reg)
//
// Metric names start with the namespace ("turnstile" unless WithNamespace
// says otherwise); labels are few-valued: backend (the store's name, as in
// errors), outcome, op, and name for breakers. Lock keys and owner ids
// are never labels. The alert rules in deploy/prometheus/alerts.yml and
// the Grafana dashboard in deploy/grafana/turnstile.json use the default
// names.
//
// The figures are what this process saw: a lease is counted as held from
// the acquisition its Client reported until its release or loss was
// reported, and a forced expiry is a lease this process lost without
// releasing it (the store refused a renewal, or the lease's conservative
// local deadline passed without one). A process that is paused (GC, VM
// stall) reports a loss only when it runs again; fencing tokens, not
// metrics, protect the data meanwhile.
package metrics

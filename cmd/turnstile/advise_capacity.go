package main

// capacity is the sizing of the store for the load: what the design
// routes to it, what one group of its servers carries, and how many
// groups that takes. Its JSON form is the "capacity" object of --json.
type capacity struct {
	// Source is "measured" (--backend) or "documented".
	Source string `json:"source"`
	// Store is what the figures are for: "redis", "redlock-5", "etcd",
	// "postgres", ... (the recommended store).
	Store string `json:"store"`
	// ServerCPUMicrosPerAcq is the server CPU time of one request (an
	// acquisition and its release, or a lock-free step), summed over a
	// group's nodes; 0 when not known.
	ServerCPUMicrosPerAcq float64 `json:"server_cpu_us_per_acq"`
	RoundTripMicros       float64 `json:"round_trip_us"`
	// StoreCores is the server cores the load keeps busy (requests × CPU
	// per request); 0 when not known.
	StoreCores float64 `json:"store_cores"`
	// RequestsPerSecond is what the design sends the store: acquisitions
	// or lock-free steps, and renewals (each counted as an acquisition).
	RequestsPerSecond float64 `json:"requests_per_s"`
	// PerGroupRate is what one group (a server, a Redlock, an ensemble, a
	// database) carries at the headroom, in requests per second.
	PerGroupRate float64 `json:"per_group_rate"`
	// Groups is how many groups the design has (Redlocks whose keys are
	// partitioned between them, Redis Cluster masters), Nodes how many
	// servers that is.
	Groups int `json:"groups"`
	Nodes  int `json:"nodes"`
	// BusiestGroupRate is what the group that holds the hottest key
	// carries: its own share of the keys and the hottest key.
	BusiestGroupRate float64 `json:"busiest_group_rate"`
	Headroom         float64 `json:"headroom"`
	// LocksHeld is the locks held at once on average (rate × hold),
	// InFlight the acquisitions under way or held at once (rate × (hold +
	// 2 round trips)), or the lock-free steps under way: the client
	// concurrency the load needs. Designs without locks hold none.
	LocksHeld float64 `json:"locks_held"`
	InFlight  float64 `json:"in_flight"`
	// RenewalsPerSecond are the watchdog's renewals (leases held past a
	// third of the default TTL are renewed every third of it).
	RenewalsPerSecond float64 `json:"renewals_per_s"`
	// HotKeyRate is the acquisitions per second of the hottest key,
	// HotKeyLimit the most one key can be locked per second (1 ÷ (hold +
	// handoff)).
	HotKeyRate  float64 `json:"hot_key_rate"`
	HotKeyLimit float64 `json:"hot_key_limit"`
	// AcquireMicros is the expected uncontended acquisition time.
	AcquireMicros float64 `json:"acquire_us"`
	// Failover is where the design sends the load when its store is
	// down (phase 4's database), and what that carries; nil without one.
	Failover *failover `json:"failover"`
	// Fits says whether the design carries the load: every group carries
	// what is routed to it, the busiest included, and so does the
	// failover store after a failover. A design with no server (one
	// process) fits.
	Fits bool `json:"fits"`
}

// failover is the store a design moves its load to when its primary is
// down.
type failover struct {
	Store             string  `json:"store"`
	PerGroupRate      float64 `json:"per_group_rate"`
	RequestsPerSecond float64 `json:"requests_per_s"`
}

// newCapacity is the capacity before the design is sized: the load's
// figures that do not depend on the store.
func newCapacity(d demand, c cost) capacity {
	return capacity{Source: c.source, RoundTripMicros: c.roundTrip, AcquireMicros: c.roundTrip, Headroom: headroom,
		HotKeyRate: d.hot, HotKeyLimit: d.hotLimit, Fits: true}
}

// locks sets the figures of a lock design: the locks held and in flight,
// and the requests it sends the store, renewals too when a watchdog
// renews its leases.
func (k *capacity) locks(in *adviseInput, d demand, watchdog bool) {
	k.LocksHeld = d.rate * in.HoldMicros / 1e6
	k.InFlight = d.rate * (in.HoldMicros + 2*k.RoundTripMicros) / 1e6
	k.RequestsPerSecond = d.rate
	if watchdog {
		k.RenewalsPerSecond = d.renewals()
		k.RequestsPerSecond = d.requests
	}
}

// spread sizes groups of nodes servers, each group carrying per requests
// per second and spending cpu µs per request over its nodes, the keys
// partitioned between them and hot requests per second on the hottest
// key, at least atLeast groups when there is more than one.
func (k *capacity) spread(per, hot float64, nodes, atLeast int, cpu float64) {
	k.PerGroupRate = per
	k.Groups, k.BusiestGroupRate = partition(k.RequestsPerSecond, hot, per, atLeast)
	k.Nodes = k.Groups * nodes
	k.ServerCPUMicrosPerAcq = cpu
	k.StoreCores = k.RequestsPerSecond * cpu / 1e6
	k.Fits = carries(per, k.BusiestGroupRate)
}

// single sizes one group that carries per requests per second, a
// documented limit to plan within: no headroom on top.
func (k *capacity) single(store string, per float64, nodes int) {
	k.Source, k.Store, k.Headroom = "documented", store, 1
	k.PerGroupRate, k.Groups, k.Nodes = per, 1, nodes
	k.BusiestGroupRate = k.RequestsPerSecond
	k.Fits = carries(per, k.RequestsPerSecond)
}

// failTo makes the design fail over to store, carrying per requests per
// second, with all of its load.
func (k *capacity) failTo(store string, per float64) {
	k.Failover = &failover{Store: store, PerGroupRate: per, RequestsPerSecond: k.RequestsPerSecond}
	k.Fits = k.Fits && carries(per, k.RequestsPerSecond)
}

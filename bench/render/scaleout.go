package render

import "github.com/turnstilelock/turnstile/bench/workload"

// ScaleOut sets turnstile on a Redis Cluster beside turnstile on one
// server at the same number of workers. On a machine with fewer cores
// than servers, throughput alone cannot grow with masters; what shows
// whether it would is the work per busy server core: acquisitions per
// second of the servers' CPU time (INFO cpu of every master). Ratio near
// 1 means each master does a single server's work per core, so a cluster
// of N masters on N free cores serves N times a single server.
type ScaleOut struct {
	ID           string  `json:"id"`     // the cluster cell
	Single       string  `json:"single"` // the single-server cell beside it
	Masters      int     `json:"masters"`
	PerSecond    float64 `json:"pairs_per_second"`
	SinglePerSec float64 `json:"single_pairs_per_second"`
	// PerCore and SinglePerCore are pairs per second of server CPU time.
	PerCore       float64 `json:"pairs_per_server_core_second"`
	SinglePerCore float64 `json:"single_pairs_per_server_core_second"`
	Ratio         float64 `json:"ratio"` // PerCore ÷ SinglePerCore
	// CPUMicros and SingleCPUMicros are the servers' CPU µs per pair.
	CPUMicros       float64 `json:"server_cpu_us_per_pair"`
	SingleCPUMicros float64 `json:"single_server_cpu_us_per_pair"`
	// Cores is how many server cores the cluster kept busy.
	Cores float64 `json:"server_cores"`
}

// ScaleOuts pairs every turnstile cluster cell with the uncontended
// single-server turnstile cell of as many workers, where both measured
// the servers' CPU.
func ScaleOuts(cells []workload.Result) []ScaleOut {
	var out []ScaleOut
	for _, c := range cells {
		if c.Library != "turnstile" || !c.Cluster || c.ServerCPUMicrosPerAcq <= 0 {
			continue
		}
		for _, s := range cells {
			if s.Library != "turnstile" || s.Workload != "uncontended" || s.Nodes != 1 || s.Concurrency != c.Concurrency || s.ServerCPUMicrosPerAcq <= 0 {
				continue
			}
			so := ScaleOut{ID: c.ID, Single: s.ID, Masters: c.Nodes, PerSecond: c.PerSecond, SinglePerSec: s.PerSecond,
				PerCore: 1e6 / c.ServerCPUMicrosPerAcq, SinglePerCore: 1e6 / s.ServerCPUMicrosPerAcq,
				CPUMicros: c.ServerCPUMicrosPerAcq, SingleCPUMicros: s.ServerCPUMicrosPerAcq, Cores: c.ServerCores}
			so.Ratio = so.PerCore / so.SinglePerCore
			out = append(out, so)
		}
	}
	return out
}

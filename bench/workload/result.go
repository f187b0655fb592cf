package workload

import (
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what one cell measured. Latencies are in microseconds.
type Result struct {
	Kind        string `json:"kind"` // "cell"
	Workload    string `json:"workload"`
	ID          string `json:"id"`
	Library     string `json:"library"`
	Concurrency int    `json:"concurrency"`
	HotKeys     int    `json:"hot_keys"`
	Nodes       int    `json:"nodes"`
	Cluster     bool   `json:"cluster,omitempty"` // Nodes are one Redis Cluster's masters
	Processes   int    `json:"processes"`
	// Clients is how many Lockers the workers were spread over, in all
	// processes.
	Clients    int     `json:"clients"`
	HoldMicros float64 `json:"hold_us"`

	// Seconds is the measured time: from the start of the workers to the
	// end of the last release.
	Seconds      float64 `json:"seconds"`
	Acquisitions int64   `json:"acquisitions"`
	// PerSecond is acquisitions (each followed by its release: pairs)
	// per second.
	PerSecond float64 `json:"per_second"`
	Errors    int64   `json:"errors"`
	Error     string  `json:"error,omitempty"`

	// Acquisition latency, from the call until the lock is held; for
	// contended workloads it includes the wait.
	P50Micros  float64 `json:"p50_us"`
	P99Micros  float64 `json:"p99_us"`
	P999Micros float64 `json:"p999_us"`
	MaxMicros  float64 `json:"max_us"`

	// Fairness: the fewest and most acquisitions one worker made, and
	// Jain's index over all workers (1: perfectly even).
	FairMin int64   `json:"fair_min"`
	FairMax int64   `json:"fair_max"`
	Jain    float64 `json:"jain"`
	// Commands is the number of commands the servers executed during the
	// cell (INFO commandstats calls, summed over every command and node,
	// INFO itself excepted; commands run by scripts count too).
	Commands       int64              `json:"commands"`
	CommandsPerAcq float64            `json:"commands_per_acq"`
	ScriptsPerAcq  float64            `json:"scripts_per_acq"` // EVAL, EVALSHA, FCALL
	PerAcq         map[string]float64 `json:"per_acq,omitempty"`
	// ServerCPUMicrosPerAcq is the CPU time the servers' processes used
	// during the cell (INFO cpu, user + system, summed over nodes) per
	// acquisition: what a pair costs the server, whichever client sent
	// it. ServerCores is the same CPU time over the cell's time: near 1
	// for one server, the server was the bottleneck.
	ServerCPUMicrosPerAcq float64 `json:"server_cpu_us_per_acq"`
	// WritesPerAcq and SyncsPerAcq are, on etcd, the entries committed to
	// its replicated log and the fsyncs of that log per acquisition.
	WritesPerAcq float64 `json:"writes_per_acq,omitempty"`
	SyncsPerAcq  float64 `json:"syncs_per_acq,omitempty"`
	ServerCores  float64 `json:"server_cores"`
	// HandoffGapMicros is (time − sum of holds) ÷ acquisitions, for
	// workloads that hold one key: the time the key was free or changing
	// hands, per acquisition.
	HandoffGapMicros float64 `json:"handoff_gap_us,omitempty"`
}

// histogram bounds: 1 µs to 2 minutes, 3 significant figures.
const (
	histMin = int64(time.Microsecond)
	histMax = int64(2 * time.Minute)
)

func newResult(c Cell, t tally, d Sample) Result {
	w, cmds := c.Workload, d.Commands
	r := Result{
		Kind:         "cell",
		Workload:     w.Name,
		ID:           w.ID(),
		Library:      c.Library.Name,
		Concurrency:  w.Concurrency,
		HotKeys:      w.HotKeys,
		Nodes:        w.Nodes,
		Cluster:      w.Cluster,
		Processes:    max(w.Processes, 1),
		Clients:      max(w.Clients, w.Processes, 1),
		HoldMicros:   micros(int64(w.Hold)),
		Acquisitions: int64(len(t.Latencies)),
		Errors:       t.Errors,
		Error:        t.FirstErr,
		Commands:     cmds.Total(),
	}
	elapsed := time.Duration(t.End - t.Start)
	if elapsed <= 0 {
		elapsed = c.Duration
	}
	r.Seconds = elapsed.Seconds()
	r.PerSecond = float64(r.Acquisitions) / r.Seconds
	r.ServerCores = d.CPUSeconds / r.Seconds
	h := hdrhistogram.New(histMin, histMax, 3)
	for _, ns := range t.Latencies {
		_ = h.RecordValue(min(max(ns, histMin), histMax))
	}
	if r.Acquisitions > 0 {
		r.P50Micros = micros(h.ValueAtQuantile(50))
		r.P99Micros = micros(h.ValueAtQuantile(99))
		r.P999Micros = micros(h.ValueAtQuantile(99.9))
		r.MaxMicros = micros(h.Max())
		n := float64(r.Acquisitions)
		r.CommandsPerAcq = float64(r.Commands) / n
		r.ScriptsPerAcq = float64(cmds.Scripts()) / n
		r.ServerCPUMicrosPerAcq = d.CPUSeconds * 1e6 / n
		r.WritesPerAcq, r.SyncsPerAcq = d.Writes/n, d.Syncs/n
		r.PerAcq = make(map[string]float64, len(cmds))
		for name, calls := range cmds {
			r.PerAcq[name] = float64(calls) / n
		}
		if w.Hold > 0 && w.HotKeys == 1 {
			r.HandoffGapMicros = micros((int64(elapsed) - t.HoldNanos) / r.Acquisitions)
		}
	}
	r.FairMin, r.FairMax, r.Jain = fairness(t.PerWorker)
	return r
}

// fairness returns the fewest and most acquisitions per worker and Jain's
// fairness index (Σx)² ÷ (n·Σx²).
func fairness(per []int64) (lo, hi int64, jain float64) {
	if len(per) == 0 {
		return 0, 0, 0
	}
	lo, hi = math.MaxInt64, 0
	var sum, sq float64
	for _, n := range per {
		lo, hi = min(lo, n), max(hi, n)
		sum += float64(n)
		sq += float64(n) * float64(n)
	}
	if sq == 0 {
		return lo, hi, 0
	}
	return lo, hi, sum * sum / (float64(len(per)) * sq)
}

func micros(ns int64) float64 { return float64(ns) / 1e3 }

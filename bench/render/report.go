// Package render writes a benchmark run's results three ways: a text
// table for the terminal, JSON lines for programs, and a self-contained
// HTML page with inline SVG charts (no scripts, no external files) for
// people.
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// Report is one run of the benchmark.
type Report struct {
	// Title heads the HTML page.
	Title string
	// Started is when the run began.
	Started time.Time
	// Notes are free lines about the run (machine, settings, caveats).
	Notes []string
	// Cells are the cells' results in the order they ran.
	Cells []workload.Result
	// Limits are redis-benchmark's figures on the single server.
	Limits []workload.LimitResult
	// Scale is the held-lease cell, if it ran.
	Scale *workload.ScaleResult
	// Problems are cells or steps that failed, one line each.
	Problems []string
}

// Comparison sets turnstile against the fastest peer in one workload.
type Comparison struct {
	ID        string  `json:"id"`
	Turnstile float64 `json:"turnstile_per_second"`
	BestPeer  string  `json:"best_peer"`
	PeerRate  float64 `json:"best_peer_per_second"`
	Ratio     float64 `json:"ratio"`
}

// Compare returns, per workload in which turnstile and at least one
// other library ran, turnstile's acquisitions per second (the row named
// "turnstile": turnstile at its defaults) over the best other
// library's. Variants of turnstile (names beginning "turnstile", such as
// "turnstile-shared-backoff") are no peers.
func Compare(cells []workload.Result) []Comparison {
	var out []Comparison
	for _, id := range ids(cells) {
		var c Comparison
		c.ID = id
		seen := false
		for _, r := range cells {
			switch {
			case r.ID != id:
			case r.Library == "turnstile":
				c.Turnstile, seen = r.PerSecond, true
			case strings.HasPrefix(r.Library, "turnstile"): // a variant of turnstile, no peer
			case r.PerSecond > c.PeerRate:
				c.BestPeer, c.PeerRate = r.Library, r.PerSecond
			}
		}
		if seen && c.BestPeer != "" {
			c.Ratio = c.Turnstile / c.PeerRate
			out = append(out, c)
		}
	}
	return out
}

// Capacity is turnstile's pairs per second as a fraction of what Redis
// can run of turnstile's scripts: EVALSHA capacity ÷ scripts per pair.
//
// That capacity is measured with the least a lock script does (one SET
// NX PX); turnstile's scripts do more (fencing token, release notice).
// The server's CPU time tells how much more: PairCPUMicros is what one
// pair cost the server in the cell, ScriptCPUMicros what one EVALSHA of
// the one-line script cost it under redis-benchmark, and Ceiling the
// fraction turnstile would reach with the server's core busy with
// nothing but its pairs — (1 s ÷ PairCPUMicros) ÷ ScriptPairs. ServerCores
// is how busy the server was in the cell (1: one core, all along).
type Capacity struct {
	ID              string  `json:"id"`
	Pipeline        int     `json:"pipeline"`
	PairsPerSecond  float64 `json:"pairs_per_second"`
	ScriptsPerPair  float64 `json:"scripts_per_pair"`
	ScriptPairs     float64 `json:"script_capacity_pairs_per_second"`
	Fraction        float64 `json:"fraction"`
	PairCPUMicros   float64 `json:"pair_cpu_us"`
	ScriptCPUMicros float64 `json:"script_cpu_us"`
	ServerCores     float64 `json:"server_cores"`
	Ceiling         float64 `json:"ceiling"`
}

// Capacities relates every single-node, uncontended turnstile cell to
// every redis-benchmark figure.
func Capacities(r Report) []Capacity {
	var out []Capacity
	for _, c := range r.Cells {
		if c.Library != "turnstile" || c.Nodes != 1 || c.HotKeys != 0 || c.ScriptsPerAcq == 0 {
			continue
		}
		for _, l := range r.Limits {
			pairs := l.EvalshaPerSecond / c.ScriptsPerAcq
			cp := Capacity{ID: c.ID, Pipeline: l.Pipeline, PairsPerSecond: c.PerSecond, ScriptsPerPair: c.ScriptsPerAcq, ScriptPairs: pairs, Fraction: c.PerSecond / pairs,
				PairCPUMicros: c.ServerCPUMicrosPerAcq, ScriptCPUMicros: l.EvalshaCPUMicros, ServerCores: c.ServerCores}
			if cp.PairCPUMicros > 0 {
				cp.Ceiling = 1e6 / cp.PairCPUMicros / pairs
			}
			out = append(out, cp)
		}
	}
	return out
}

// JSONLines writes the report as JSON lines: one "run" line with the
// title, start and notes, then every cell ("cell"), redis-benchmark
// figure ("limit"), the scale cell ("scale"), comparison
// ("comparison"), capacity ("capacity"), cluster against one server
// ("scaleout") and problem ("problem").
func JSONLines(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	lines := []any{map[string]any{"kind": "run", "title": r.Title, "started": r.Started.UTC().Format(time.RFC3339), "notes": r.Notes}}
	for _, c := range r.Cells {
		lines = append(lines, c)
	}
	for _, l := range r.Limits {
		lines = append(lines, l)
	}
	if r.Scale != nil {
		lines = append(lines, r.Scale)
	}
	for _, c := range Compare(r.Cells) {
		lines = append(lines, struct {
			Kind string `json:"kind"`
			Comparison
		}{"comparison", c})
	}
	for _, c := range Capacities(r) {
		lines = append(lines, struct {
			Kind string `json:"kind"`
			Capacity
		}{"capacity", c})
	}
	for _, s := range ScaleOuts(r.Cells) {
		lines = append(lines, struct {
			Kind string `json:"kind"`
			ScaleOut
		}{"scaleout", s})
	}
	for _, p := range r.Problems {
		lines = append(lines, map[string]string{"kind": "problem", "problem": p})
	}
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("render: json lines: %w", err)
		}
	}
	return nil
}

// ids returns the cells' workload ids in first-seen order.
func ids(cells []workload.Result) []string {
	var out []string
	for _, c := range cells {
		if !slices.Contains(out, c.ID) {
			out = append(out, c.ID)
		}
	}
	return out
}

// libraries returns the cells' libraries in first-seen order, turnstile
// first.
func libraries(cells []workload.Result) []string {
	out := []string{}
	for _, c := range cells {
		if !slices.Contains(out, c.Library) {
			out = append(out, c.Library)
		}
	}
	if i := slices.Index(out, "turnstile"); i > 0 {
		out = append([]string{"turnstile"}, slices.Delete(out, i, i+1)...)
	}
	return out
}

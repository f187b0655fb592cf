package render

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/bench/workload"
)

const style = `body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1340px;color:#212529;padding:0 16px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #dee2e6}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg{max-width:100%;height:auto;background:#fff;border:1px solid #e9ecef;border-radius:4px}
svg .t{font-size:13px;font-weight:600}svg .a{font-size:11px;fill:#495057}svg .g{stroke:#e9ecef}
table{border-collapse:collapse;font-size:12.5px}td,th{padding:3px 8px;border-bottom:1px solid #e9ecef;text-align:right}
td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}
.win{color:#2b8a3e;font-weight:600}.lose{color:#c92a2a;font-weight:600}.note{color:#495057}`

// HTML writes the report as one self-contained page: inline CSS and SVG,
// no scripts and nothing fetched.
func HTML(w io.Writer, r Report) error {
	var b strings.Builder
	title := r.Title
	if title == "" {
		title = "turnstile benchmark"
	}
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head><body>\n", html.EscapeString(title), style)
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p class=\"note\">Run started %s.</p>\n", html.EscapeString(title), r.Started.UTC().Format(time.RFC1123))
	if len(r.Notes) > 0 {
		b.WriteString("<ul class=\"note\">")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "<li>%s</li>", html.EscapeString(n))
		}
		b.WriteString("</ul>\n")
	}
	headline(&b, r)
	charts(&b, r)
	cellTable(&b, r.Cells)
	extras(&b, r)
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func headline(b *strings.Builder, r Report) {
	cs, caps, so := Compare(r.Cells), Capacities(r), ScaleOuts(r.Cells)
	if len(cs) == 0 && len(caps) == 0 && len(so) == 0 {
		return
	}
	b.WriteString("<h2>Headline</h2><ul>")
	for _, c := range cs {
		class := "win"
		if c.Ratio < 1 {
			class = "lose"
		}
		fmt.Fprintf(b, "<li>%s: turnstile %s/s, fastest peer %s %s/s: <span class=\"%s\">%.2f×</span></li>", html.EscapeString(c.ID), short(c.Turnstile), html.EscapeString(c.BestPeer), short(c.PeerRate), class, c.Ratio)
	}
	for _, c := range caps {
		fmt.Fprintf(b, "<li>%s: %s pairs/s = %.0f%% of Redis's script capacity at -P %d (%s EVALSHA/s ÷ %.2f scripts per pair)", html.EscapeString(c.ID), short(c.PairsPerSecond), 100*c.Fraction, c.Pipeline, short(c.ScriptPairs*c.ScriptsPerPair), c.ScriptsPerPair)
		if c.Ceiling > 0 && c.ScriptCPUMicros > 0 {
			fmt.Fprintf(b, "; a pair costs the server %.1f µs of CPU, %.1f× a one-line EVALSHA, so a fully busy server core would reach %.0f%%; the server was busy %.2f cores", c.PairCPUMicros, c.PairCPUMicros/c.ScriptCPUMicros, 100*c.Ceiling, c.ServerCores)
		}
		b.WriteString("</li>")
	}
	for _, s := range so {
		fmt.Fprintf(b, "<li>%s: %s pairs/s on %d masters, %s per busy server core-second against %s per core-second for %s on one server: %.2f×</li>",
			html.EscapeString(s.ID), short(s.PerSecond), s.Masters, short(s.PerCore), short(s.SinglePerCore), html.EscapeString(s.Single), s.Ratio)
	}
	b.WriteString("</ul>\n")
}

func charts(b *strings.Builder, r Report) {
	libs := libraries(r.Cells)
	if len(libs) == 0 {
		return
	}
	b.WriteString("<h2>Throughput</h2><div class=\"charts\">")
	// Uncontended throughput over concurrency.
	var conc []int
	for _, c := range r.Cells {
		if c.Workload == "uncontended" && !slices.Contains(conc, c.Concurrency) {
			conc = append(conc, c.Concurrency)
		}
	}
	slices.Sort(conc)
	if len(conc) > 0 {
		xs := make([]string, len(conc))
		for i, c := range conc {
			xs[i] = strconv.Itoa(c)
		}
		vals := make([][]float64, len(libs))
		for li, lib := range libs {
			vals[li] = make([]float64, len(conc))
			for ci, cc := range conc {
				vals[li][ci] = pick(r.Cells, func(c workload.Result) bool {
					return c.Library == lib && c.Workload == "uncontended" && c.Concurrency == cc
				}, func(c workload.Result) float64 { return c.PerSecond })
			}
		}
		b.WriteString(lines("Uncontended pairs/s by concurrency (workers)", "pairs/s", xs, libs, vals))
	}
	var others []string
	for _, id := range ids(r.Cells) {
		if !strings.HasPrefix(id, "uncontended/") {
			others = append(others, id)
		}
	}
	if len(others) > 0 {
		b.WriteString(byWorkload(r.Cells, "Acquisitions/s, other workloads", "acq/s", others, libs, func(c workload.Result) float64 { return c.PerSecond }, false))
	}
	b.WriteString(byWorkload(r.Cells, "Server commands per acquisition (log scale)", "commands", ids(r.Cells), libs, func(c workload.Result) float64 { return c.CommandsPerAcq }, true))
	var herds []string
	for _, c := range r.Cells {
		if c.HoldMicros > 0 && c.HotKeys == 1 && !slices.Contains(herds, c.ID) {
			herds = append(herds, c.ID)
		}
	}
	if len(herds) > 0 {
		b.WriteString(byWorkload(r.Cells, "Handoff gap: (time − holds) ÷ acquisitions (log scale)", "ms", herds, libs, func(c workload.Result) float64 { return c.HandoffGapMicros / 1e3 }, true))
	}
	b.WriteString("</div>\n<h2>Acquire latency (p50, p99, p99.9; log scale)</h2><div class=\"charts\">")
	for _, id := range ids(r.Cells) {
		var groups []string
		var vals [][]float64
		for _, lib := range libs {
			for _, c := range r.Cells {
				if c.ID == id && c.Library == lib && c.Acquisitions > 0 {
					groups = append(groups, lib)
					vals = append(vals, []float64{c.P50Micros / 1e3, c.P99Micros / 1e3, c.P999Micros / 1e3})
				}
			}
		}
		if len(groups) > 0 {
			b.WriteString(bars(id, "ms", groups, []string{"p50", "p99", "p99.9"}, vals, true))
		}
	}
	b.WriteString("</div>\n")
}

// byWorkload draws one bar per library in each workload.
func byWorkload(cells []workload.Result, title, unit string, workloads, libs []string, val func(workload.Result) float64, log bool) string {
	vals := make([][]float64, len(workloads))
	for wi, id := range workloads {
		vals[wi] = make([]float64, len(libs))
		for li, lib := range libs {
			vals[wi][li] = pick(cells, func(c workload.Result) bool { return c.ID == id && c.Library == lib }, val)
		}
	}
	return bars(title, unit, workloads, libs, vals, log)
}

// pick returns val of the first cell that matches, or NaN.
func pick(cells []workload.Result, match func(workload.Result) bool, val func(workload.Result) float64) float64 {
	for _, c := range cells {
		if match(c) {
			return val(c)
		}
	}
	return math.NaN()
}

func cellTable(b *strings.Builder, cells []workload.Result) {
	if len(cells) == 0 {
		return
	}
	b.WriteString("<h2>All cells</h2><table><tr><th>workload</th><th>library</th><th>acq/s</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>fair min/max</th><th>Jain</th><th>cmds/acq</th><th>scripts/acq</th><th>server µs/acq</th><th>server cores</th><th>gap ms</th><th>acquisitions</th><th>errors</th></tr>\n")
	for _, c := range cells {
		gap := "–"
		if c.HoldMicros > 0 && c.HotKeys == 1 {
			gap = ms(c.HandoffGapMicros)
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%.0f</td><td>%s</td><td>%s</td><td>%s</td><td>%d/%d</td><td>%.3f</td><td>%.2f</td><td>%.2f</td><td>%.1f</td><td>%.2f</td><td>%s</td><td>%d</td><td title=\"%s\">%d</td></tr>\n",
			html.EscapeString(c.ID), html.EscapeString(c.Library), c.PerSecond, ms(c.P50Micros), ms(c.P99Micros), ms(c.P999Micros),
			c.FairMin, c.FairMax, c.Jain, c.CommandsPerAcq, c.ScriptsPerAcq, c.ServerCPUMicrosPerAcq, c.ServerCores, gap, c.Acquisitions, html.EscapeString(c.Error), c.Errors)
	}
	b.WriteString("</table>\n")
}

func extras(b *strings.Builder, r Report) {
	if len(r.Limits) > 0 {
		b.WriteString("<h2>What Redis itself does (redis-benchmark, 50 connections)</h2><table><tr><th>pipeline</th><th></th><th>SET/s</th><th>EVALSHA/s</th><th>server µs per EVALSHA</th></tr>")
		for _, l := range r.Limits {
			fmt.Fprintf(b, "<tr><td>-P %d</td><td></td><td>%.0f</td><td>%.0f</td><td>%.2f</td></tr>", l.Pipeline, l.SetPerSecond, l.EvalshaPerSecond, l.EvalshaCPUMicros)
		}
		fmt.Fprintf(b, "</table><p class=\"note\">EVALSHA of <code>%s</code> on random keys.</p>\n", html.EscapeString(workload.LimitScript))
	}
	if s := r.Scale; s != nil {
		fmt.Fprintf(b, "<h2>Held leases</h2><p>%d leases held under one client's watchdog (TTL %gs, renewed every TTL/3) for %.1f s after %.1f s to acquire them: <b>%.0f bytes</b> of client heap per lease, <b>%.0f</b> renewal scripts/s of %.0f needed to renew every lease every TTL/3 (%.0f commands/s), <b>%d</b> forced expiries; released in %.1f s.</p>\n",
			s.Leases, s.TTL, s.HeldSeconds, s.AcquireSeconds, s.BytesPerLease, s.RenewalsPerSecond, s.NeededPerSecond, s.CommandsPerSecond, s.ForcedExpiries, s.ReleaseSeconds)
	}
	if len(r.Problems) > 0 {
		b.WriteString("<h2>Problems</h2><ul>")
		for _, p := range r.Problems {
			fmt.Fprintf(b, "<li>%s</li>", html.EscapeString(p))
		}
		b.WriteString("</ul>\n")
	}
}

package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// stat is one command's line of INFO commandstats.
type stat struct {
	calls int64
	usec  int64
}

// parseStats reads INFO commandstats: lines such as
// "cmdstat_set:calls=3,usec=12,usec_per_call=4.00,...". Lines it cannot
// read are left out.
func parseStats(info string) map[string]stat {
	out := map[string]stat{}
	for line := range strings.SplitSeq(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found || name == "info" || strings.HasPrefix(name, "config") || name == "flushall" {
			continue
		}
		var s stat
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "calls":
				s.calls = n
			case "usec":
				s.usec = n
			}
		}
		out[name] = s
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func column(cs []cell, f func(cell) float64) []float64 {
	out := make([]float64, len(cs))
	for i, c := range cs {
		out[i] = f(c)
	}
	return out
}

// report prints, for each library, the medians over the passes and the
// median of its per-pass ratios to turnstile's throughput.
func report(out io.Writer, w workload.Workload, libs []workload.Library, got map[string][]cell, load string) {
	fmt.Fprintf(out, "\n%s: %d passes, load average %s (medians over the passes)\n", w.ID(), len(got[libs[0].Name]), load)
	fmt.Fprintf(out, "%-12s %9s %9s %9s %9s %9s %9s %9s %5s\n", "library", "pairs/s", "µs/pair", "p50 µs", "vs turn.", "cmds", "srv µs", "allocs", "GCs")
	base := got["turnstile"]
	for _, l := range libs {
		cs := got[l.Name]
		ratio := "-"
		if len(base) == len(cs) && l.Name != "turnstile" {
			rs := make([]float64, len(cs))
			for i := range cs {
				rs[i] = base[i].perSecond / cs[i].perSecond
			}
			ratio = fmt.Sprintf("%.2f×", median(rs))
		}
		ps := median(column(cs, func(c cell) float64 { return c.perSecond }))
		fmt.Fprintf(out, "%-12s %9.0f %9.1f %9.1f %9s %9.2f %9.1f %9.1f %5.0f\n", l.Name, ps, 1e6/ps,
			median(column(cs, func(c cell) float64 { return c.p50 })), ratio,
			median(column(cs, func(c cell) float64 { return c.commandsPerPair })),
			median(column(cs, func(c cell) float64 { return c.serverCPUPerPair })),
			median(column(cs, func(c cell) float64 { return c.allocs })),
			median(column(cs, func(c cell) float64 { return float64(c.gcs) })))
	}
	fmt.Fprintf(out, "(vs turn.: turnstile's pairs/s over the library's, median of the passes; srv µs: server CPU per pair)\n")
	fmt.Fprintf(out, "server time per command (INFO commandstats, summed over the passes): calls per pair, µs per call\n")
	for _, l := range libs {
		sum := map[string]stat{}
		var pairs int64
		for _, c := range got[l.Name] {
			pairs += c.acquisitions
			for k, s := range c.cmds {
				t := sum[k]
				t.calls += s.calls
				t.usec += s.usec
				sum[k] = t
			}
		}
		parts := []string{}
		for _, k := range slices.Sorted(maps.Keys(sum)) {
			s := sum[k]
			if s.calls == 0 || pairs == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.2f×%.2fµs", k, float64(s.calls)/float64(pairs), float64(s.usec)/float64(s.calls)))
		}
		fmt.Fprintf(out, "  %-12s %s\n", l.Name, strings.Join(parts, ", "))
	}
}

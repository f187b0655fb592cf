package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Table writes the report as aligned text: one row per cell, then the
// comparisons, the capacity fractions, redis-benchmark's figures, the
// scale cell and any problems.
func Table(w io.Writer, r Report) error {
	var rows strings.Builder
	tw := tabwriter.NewWriter(&rows, 0, 0, 2, ' ', tabwriter.AlignRight)
	idW, libW := len("workload"), len("library")
	for _, c := range r.Cells {
		idW, libW = max(idW, len(c.ID)), max(libW, len(c.Library))
	}
	// The names are padded here: tabwriter right-aligns every column.
	fmt.Fprintf(tw, "%-*s\t%-*s\tacq/s\tp50 ms\tp99 ms\tp99.9 ms\tfair min/max\tjain\tcmds/acq\tscripts/acq\tsrv µs/acq\tsrv cores\tgap ms\terrors\t\n", idW, "workload", libW, "library")
	for _, c := range r.Cells {
		gap := "-"
		if c.HoldMicros > 0 && c.HotKeys == 1 {
			gap = ms(c.HandoffGapMicros)
		}
		fmt.Fprintf(tw, "%-*s\t%-*s\t%.0f\t%s\t%s\t%s\t%d/%d\t%.3f\t%.2f\t%.2f\t%.1f\t%.2f\t%s\t%d\t\n",
			idW, c.ID, libW, c.Library, c.PerSecond, ms(c.P50Micros), ms(c.P99Micros), ms(c.P999Micros),
			c.FairMin, c.FairMax, c.Jain, c.CommandsPerAcq, c.ScriptsPerAcq, c.ServerCPUMicrosPerAcq, c.ServerCores, gap, c.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Right alignment pads every cell on the left, the first too.
	for line := range strings.Lines(rows.String()) {
		if _, err := io.WriteString(w, strings.TrimPrefix(line, "  ")); err != nil {
			return err
		}
	}
	if cs := Compare(r.Cells); len(cs) > 0 {
		fmt.Fprintln(w, "\nturnstile against the fastest peer:")
		peerW := 0
		for _, c := range cs {
			peerW = max(peerW, len(c.BestPeer))
		}
		for _, c := range cs {
			fmt.Fprintf(w, "  %-28s %9.0f/s vs %-*s %9.0f/s  = %.2fx\n", c.ID, c.Turnstile, peerW, c.BestPeer, c.PeerRate, c.Ratio)
		}
	}
	if cs := Capacities(r); len(cs) > 0 {
		fmt.Fprintln(w, "\nturnstile against Redis's script capacity (EVALSHA/s ÷ scripts per pair):")
		for _, c := range cs {
			fmt.Fprintf(w, "  %-28s -P %-2d %9.0f pairs/s of %9.0f (%.2f scripts/pair) = %.0f%%", c.ID, c.Pipeline, c.PairsPerSecond, c.ScriptPairs, c.ScriptsPerPair, 100*c.Fraction)
			if c.Ceiling > 0 && c.ScriptCPUMicros > 0 {
				fmt.Fprintf(w, "; a pair costs the server %.1f µs of CPU = %.1f one-line EVALSHAs (%.2f µs each): ceiling %.0f%%, server busy %.2f cores", c.PairCPUMicros, c.PairCPUMicros/c.ScriptCPUMicros, c.ScriptCPUMicros, 100*c.Ceiling, c.ServerCores)
			}
			fmt.Fprintln(w)
		}
	}
	if so := ScaleOuts(r.Cells); len(so) > 0 {
		fmt.Fprintln(w, "\nturnstile on a Redis Cluster against one server, per busy server core:")
		for _, s := range so {
			fmt.Fprintf(w, "  %-20s %9.0f pairs/s, %8.0f per server core-second (%.1f µs/pair, %.2f cores) vs %-18s %9.0f pairs/s, %8.0f per core-second (%.1f µs/pair) = %.2fx\n",
				s.ID, s.PerSecond, s.PerCore, s.CPUMicros, s.Cores, s.Single, s.SinglePerSec, s.SinglePerCore, s.SingleCPUMicros, s.Ratio)
		}
	}
	if len(r.Limits) > 0 {
		fmt.Fprintln(w, "\nredis-benchmark on the single server (50 connections):")
		for _, l := range r.Limits {
			fmt.Fprintf(w, "  -P %-2d  SET %9.0f/s   EVALSHA (SET NX PX script) %9.0f/s, %.2f µs of server CPU each\n", l.Pipeline, l.SetPerSecond, l.EvalshaPerSecond, l.EvalshaCPUMicros)
		}
	}
	if s := r.Scale; s != nil {
		fmt.Fprintf(w, "\nheld leases: %d under one client's watchdog, TTL %gs, held %.1fs after %.1fs to acquire:\n", s.Leases, s.TTL, s.HeldSeconds, s.AcquireSeconds)
		fmt.Fprintf(w, "  %.0f bytes of client heap per lease, %.0f renewal scripts/s of %.0f needed (%.0f commands/s), %d forced expiries, released in %.1fs\n",
			s.BytesPerLease, s.RenewalsPerSecond, s.NeededPerSecond, s.CommandsPerSecond, s.ForcedExpiries, s.ReleaseSeconds)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(w, "\nproblems:")
		for _, p := range r.Problems {
			fmt.Fprintln(w, "  "+p)
		}
	}
	return nil
}

// ms formats microseconds as milliseconds with three significant
// decimals' worth of precision.
func ms(us float64) string {
	v := us / 1e3
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

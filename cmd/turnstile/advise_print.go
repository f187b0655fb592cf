package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// fmtRate writes a rate as the advice prints it: 12,500, 2.5 or, below
// one, two significant digits (0.00028), never 0 for a rate above 0.
func fmtRate(v float64) string {
	switch {
	case v >= 9.95:
		return thousands(math.Round(v))
	case v >= 0.995:
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

// writeTable writes the advice for people.
func (a advice) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	stores := "any"
	switch {
	case a.Input.Stores == nil:
	case len(a.Input.Stores) == 0:
		stores = "none yet"
	default:
		stores = strings.Join(a.Input.Stores, ",")
	}
	fmt.Fprintf(tw, "load\t%s acquisitions/s, hold %v, hottest key %s %%, safety %s, operation %s, stores %s\n",
		fmtRate(a.Input.Rate), a.Input.hold, fmtShare(a.Input.HotKeyShare), a.Input.Safety, a.Input.Operation, stores)
	fmt.Fprintln(tw)
	r := a.Recommendation
	fmt.Fprintf(tw, "recommendation\t%s (docs/backends.md row %q)\n", r.Choice, r.Load)
	fmt.Fprintf(tw, "  turnstile\t%s\n", r.Turnstile)
	for _, s := range r.Reasons {
		fmt.Fprintf(tw, "  why\t%s\n", s)
	}
	u := a.RunnerUp
	fmt.Fprintf(tw, "runner-up\t%s (row %q)\n", u.Choice, u.Load)
	for _, s := range u.Reasons {
		fmt.Fprintf(tw, "  why not\t%s\n", s)
	}
	fmt.Fprintln(tw)
	p := a.Preset
	fmt.Fprintf(tw, "preset\t%s\n", p.Name)
	for _, u := range p.URLs {
		fmt.Fprintf(tw, "  url\t%s\n", u)
	}
	for _, o := range p.Options {
		fmt.Fprintf(tw, "  option\t%s\n", o)
	}
	for _, s := range p.Also {
		fmt.Fprintf(tw, "  also\t%s\n", s)
	}
	fmt.Fprintln(tw)
	a.Capacity.write(tw)
	fmt.Fprintln(tw)
	for i, al := range a.Alerts {
		label := ""
		if i == 0 {
			label = "alerts"
		}
		fmt.Fprintf(tw, "%s\t%s: %s\n", label, al.Name, al.Why)
	}
	if len(a.Notes) > 0 {
		fmt.Fprintln(tw)
		for i, n := range a.Notes {
			label := ""
			if i == 0 {
				label = "notes"
			}
			fmt.Fprintf(tw, "%s\t%s\n", label, n)
		}
	}
	return tw.Flush()
}

// write writes the capacity section of the table: each line from the
// figures --json gives.
func (k capacity) write(w io.Writer) {
	fmt.Fprintf(w, "capacity\t%s, %s figures\n", k.Store, k.Source)
	if k.Store != "memory" {
		renewals := ""
		if k.RenewalsPerSecond > 0 {
			renewals = fmt.Sprintf(", %s renewals among them", fmtRate(k.RenewalsPerSecond))
		}
		fmt.Fprintf(w, "  load\t%s requests/s to the store%s\n", fmtRate(k.RequestsPerSecond), renewals)
	}
	if k.ServerCPUMicrosPerAcq > 0 {
		fmt.Fprintf(w, "  server CPU\t%.1f µs per request (all nodes of a group): %s cores busy\n", k.ServerCPUMicrosPerAcq, fmtRate(k.StoreCores))
	}
	if k.Groups > 0 {
		fmt.Fprintf(w, "  servers\t%d (%d × %d), one group carrying ~%s requests/s at %.0f %% of its capacity; the busiest %s/s\n",
			k.Nodes, k.Groups, k.Nodes/k.Groups, fmtRate(k.PerGroupRate), k.Headroom*100, fmtRate(k.BusiestGroupRate))
	}
	if f := k.Failover; f != nil {
		fmt.Fprintf(w, "  failover\t%s, carrying ~%s requests/s, takes %s/s in an outage\n", f.Store, fmtRate(f.PerGroupRate), fmtRate(f.RequestsPerSecond))
	}
	if k.RoundTripMicros > 0 {
		fmt.Fprintf(w, "  round trip\t%.0f µs; acquisition ~%.0f µs uncontended\n", k.RoundTripMicros, k.AcquireMicros)
	}
	if k.LocksHeld > 0 {
		fmt.Fprintf(w, "  at once\t%s locks held, %s acquisitions in flight (client concurrency)\n", fmtRate(k.LocksHeld), fmtRate(k.InFlight))
	} else {
		fmt.Fprintf(w, "  at once\t%s steps in flight (client concurrency), no lock held\n", fmtRate(k.InFlight))
	}
	if k.HotKeyRate > 0 {
		fmt.Fprintf(w, "  hottest key\t%s acquisitions/s; a lock on one key allows at most %s/s\n", fmtRate(k.HotKeyRate), fmtRate(k.HotKeyLimit))
	}
	if k.Fits {
		fmt.Fprintf(w, "  fits\tyes\n")
	} else {
		fmt.Fprintf(w, "  fits\tno (notes say what does not)\n")
	}
}

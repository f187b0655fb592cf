package main

import (
	"fmt"
	"math"
	"strings"
)

// alert is an alert of deploy/prometheus/alerts.yml to deploy, and why.
type alert struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// pickAlerts names the alerts of deploy/prometheus/alerts.yml that apply.
func pickAlerts(in *adviseInput, row string, p preset) []alert {
	if row == rowLockFree && in.Operation == opStock {
		return []alert{} // no lock is taken: no lock alert applies
	}
	out := []alert{
		{"TurnstileAcquireLatencyP50High", "median acquisition above 5 ms (normal below 1 ms): the store or contention is slowing every lock"},
		{"TurnstileAcquireLatencyP99High", "p99 acquisition above 20 ms (normal below 5 ms): tail latency of the store, or a herd on one key"},
		{"TurnstileAcquireSuccessRateLow", "below 90 % of acquisitions get the lock: contention, leaked locks or a failing store"},
	}
	if p.Phase != 1 && p.URL != "mem://" {
		out = append(out, alert{"TurnstileRenewalFailures", "the watchdog's renewals fail: leases are about to be lost"})
	}
	out = append(out, alert{"TurnstileForcedExpiries", "leases lost while held: mutual exclusion rests on fencing alone"})
	if in.HotKeyShare > 0 || row == rowLockFree || in.Rate > tableRedis {
		out = append(out, alert{"TurnstileAcquireRetriesHigh", "acquisitions retry 5 or more times on average: a key is contended; shard it or go lock-free"})
	}
	if strings.Contains(p.URL, "redlock://") {
		out = append(out, alert{"TurnstileRedlockQuorumLow", "Redlock rounds miss their quorum: nodes failing or slower than the node timeout; one more down and no lock can be taken"})
	}
	if p.Phase == 4 {
		out = append(out, alert{"TurnstileBreakerOpen", "the breaker sent locks to the database: Redis is down"})
	}
	return out
}

// notes are what the reader should know besides the choice.
func notes(in *adviseInput, row string, k capacity, d demand, c cost) []string {
	out := []string{}
	if k.Source == "documented" && k.ServerCPUMicrosPerAcq > 0 {
		out = append(out, fmt.Sprintf("server costs are documented figures (docs/performance.md), the round trip an assumed %.0f µs: measure yours with --backend", docRoundTrip))
	}
	switch {
	case row == rowLockFree && k.Store == "redis":
		what := "one short script"
		if in.Operation == opPayment {
			what = fmt.Sprintf("%d short scripts (the claim and the result)", idempotencySteps)
		}
		out = append(out, fmt.Sprintf("each lock-free operation is sized at %.1f µs of server CPU: %s, at %.1f µs each (a one-line script's, docs/performance.md)",
			k.ServerCPUMicrosPerAcq, what, c.scriptCPU))
	case row == rowLockFree:
		out = append(out, fmt.Sprintf("no figure is documented for conditional writes, claims or inserts in %s: one database is sized at the load table's ~%s/s for a database lock; measure yours",
			storeTitle(k.Store), fmtRate(k.PerGroupRate)))
	}
	if !k.Fits {
		out = append(out, misfit(row, k, d))
	}
	if k.HotKeyRate > 0 && row != rowLockFree && k.HotKeyRate > 0.3*k.HotKeyLimit {
		out = append(out, fmt.Sprintf("the hottest key runs at %.0f %% of the most one key allows (%s/s): waiters queue; use release notices (on by default) and consider turnstile.WithQueueWhenBusy", 100*k.HotKeyRate/k.HotKeyLimit, fmtRate(k.HotKeyLimit)))
	}
	if k.RenewalsPerSecond > 0 {
		out = append(out, fmt.Sprintf("holds past %v are renewed every %v: %s renewals/s, counted in the %s requests/s as acquisitions (an upper bound)", renewEvery, renewEvery, fmtRate(k.RenewalsPerSecond), fmtRate(k.RequestsPerSecond)))
	}
	if 2*k.AcquireMicros > 5000 {
		out = append(out, "an acquisition takes more than the 5 ms p99 target here: expect TurnstileAcquireLatencyP99High at its warning level")
	}
	return out
}

// misfit says what of the design does not carry its load.
func misfit(row string, k capacity, d demand) string {
	if f := k.Failover; f != nil && !carries(f.PerGroupRate, f.RequestsPerSecond) {
		return fmt.Sprintf("the failover %s carries ~%s/s, below the %s requests/s an outage moves to it", storeTitle(f.Store), fmtRate(f.PerGroupRate), fmtRate(f.RequestsPerSecond))
	}
	// The hottest key's requests, renewals included where the design
	// renews.
	if hot := k.HotKeyRate * k.RequestsPerSecond / d.rate; !carries(k.PerGroupRate, hot) || k.Groups > 1 {
		if row == rowLockFree {
			return fmt.Sprintf("the hottest key's %s requests/s are more than one server carries (~%s/s), and a key lives on one server (stock.Sharded's shards share its hash slot): split it into %.0f keys on different masters, each holding its share",
				fmtRate(hot), fmtRate(k.PerGroupRate), math.Floor(hot/k.PerGroupRate)+1)
		}
		return fmt.Sprintf("the hottest key's %s requests/s are more than one group carries (~%s/s): no partition of the keys helps; make its step lock-free", fmtRate(hot), fmtRate(k.PerGroupRate))
	}
	return fmt.Sprintf("one %s carries ~%s/s, below the %s requests/s routed to it: not known to fit", storeTitle(k.Store), fmtRate(k.PerGroupRate), fmtRate(k.RequestsPerSecond))
}

// Package workload runs lock workloads against Redis and measures them:
// throughput, acquisition latency percentiles from an HDR histogram,
// fairness between workers, and the commands the servers executed per
// acquisition, read from INFO commandstats before and after each cell.
//
// A cell is one Workload run through one Library for a fixed duration,
// its workers in one client (Locker), spread over several in one
// process (Workload.Clients), or over child processes
// (Workload.Processes). Libraries are adapters (Locker) over a lock
// client; Turnstile adapts turnstile at its defaults (TTL 8 s and no
// retry limit aside), TurnstileSharedBackoff the same with a short
// backoff, and package peers adapts the other Go lock libraries. The
// same cell code runs every library, so their figures are comparable.
// SideBySide lists the workloads of the side-by-side comparison.
//
// The package also measures what Redis itself can do on the same machine
// (Limit, which runs redis-benchmark) and how many leases one turnstile
// client can hold under its watchdog (Scale).
//
// Figures from a machine that is busy with other work are noisy; the
// package reports what it measured and asserts nothing about it.
package workload

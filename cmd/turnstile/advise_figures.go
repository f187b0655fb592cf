package main

import (
	"strconv"
	"strings"
	"time"
)

// The figures "turnstile advise" sizes with. Each is shown in the docs,
// and adviseFigures says where: TestAdviseFiguresInDocs fails until the
// docs and this table agree, so a change to either must be made to both.
const (
	// docRedisCPU is the server CPU time, in µs, of one acquisition and
	// its release on one redis-server, on keys seen for the first time:
	// the top of the range measured at 64–256 workers.
	docRedisCPU = 29.2
	// docRedlockCPU is the same for a Redlock of docRedlockNodes, summed
	// over its nodes.
	docRedlockCPU   = 234.0
	docRedlockNodes = 5
	// docScriptCPU is what one one-line script costs the server, in µs:
	// the bound of a lock-free step (a DECRBY, one short script).
	docScriptCPU = 5.33
	// docRoundTrip is the round trip assumed between client and store, in
	// µs: within one data centre (loopback measures 25–78 µs).
	docRoundTrip = 250.0
	// handoffRoundTrips is how many round trips passing a held key to its
	// next waiter takes: the measured handoff gap (184–188 µs) over the
	// round trip of the same run (51–78 µs).
	handoffRoundTrips = 3
	// headroom is the share of a server core a plan may use: the rest
	// absorbs peaks and the store's own work.
	headroom = 0.7
	// The load table's bounds, in lock requests per second. tableDB is
	// also what one database is sized at.
	tableMutex    = 100.0
	tableDB       = 1000.0
	tableRedis    = 10000.0
	tableLockFree = 100000.0
	// consensusWrites is what one etcd or ZooKeeper ensemble writes per
	// second; an acquisition is writesPerAcquisition (grant, delete).
	consensusWrites      = 10000.0
	writesPerAcquisition = 2
	// phase3Above is the rate above which a Redlock gets fencing and
	// release notices (phase 3) even without --safety money.
	phase3Above = 35000.0
	// maxRedlocks is the most Redlocks a plan partitions keys between;
	// a load that needs more goes lock-free.
	maxRedlocks = 16
	// clusterMinMasters is the smallest Redis Cluster.
	clusterMinMasters = 3
	// Phase 1's fixed TTL: phase1TTLHolds times the average hold, at
	// least phase1MinTTL.
	phase1TTLHolds = 20
	phase1MinTTL   = 5 * time.Second
	// idempotencySteps is what one request costs package idempotency's
	// store: the claim, then the result that replaces it.
	idempotencySteps = 2
)

// docFigure is a figure of the advisor as one page of the docs shows it.
type docFigure struct {
	value float64
	doc   string // path from the repository's root
	quote string // words of doc that show the figure, line breaks aside
	shown string // the figure as quote writes it: 14.5, 1,000, 10k, 70 %
}

// cliAdvise is the advisor's own page, whose advise section states the
// figures it assumes.
const cliAdvise = "docs/cli.md"

// adviseFigures lists where the docs show each figure of the advisor.
var adviseFigures = []docFigure{
	{docRedisCPU, "docs/performance.md", "cost the server 22.6–29.2 µs of CPU at 64–256 workers", "29.2"},
	{docRedisCPU, cliAdvise, "documented: 29.2 µs on one redis-server", "29.2"},
	{docRedlockCPU, "docs/performance.md", "costs the five servers 187–234 µs of CPU together", "234"},
	{docRedlockCPU, cliAdvise, "234 µs over a Redlock of 5", "234"},
	{docRedlockNodes, "docs/backends.md", "Redlock over 5 nodes + fencing", "5"},
	{docScriptCPU, "docs/performance.md", "cost 4.99–5.33 µs per EVALSHA", "5.33"},
	{docScriptCPU, cliAdvise, "5.33 µs for a one-line script", "5.33"},
	{docRoundTrip, cliAdvise, "a round trip (assumed 250 µs)", "250"},
	{handoffRoundTrips, cliAdvise, "the handoff 3 round trips", "3"},
	{headroom, cliAdvise, "at most 70 % busy", "70 %"},
	{tableDB, cliAdvise, "at the table's 1,000/s per database", "1,000"},
	{consensusWrites, "docs/backends.md", "consensus store, ms latency, ~10k writes/s", "10k"},
	{consensusWrites, cliAdvise, "(~10,000 writes/s, 2 per acquisition)", "10,000"},
	{writesPerAcquisition, cliAdvise, "(~10,000 writes/s, 2 per acquisition)", "2"},
	{phase3Above, cliAdvise, "or above 35,000/s", "35,000"},
	{maxRedlocks, cliAdvise, "more than 16 Redlocks", "16"},
	{clusterMinMasters, cliAdvise, "a Redis Cluster has at least 3", "3"},
	{phase1TTLHolds, cliAdvise, "20 × the hold", "20"},
	{phase1MinTTL.Seconds(), cliAdvise, "at least 5 s", "5"},
	{idempotencySteps, cliAdvise, "a payment's idempotency key 2", "2"},
}

// cost is what the store costs the load: measured with --backend, or
// documented. Every capacity figure of the advice comes from one.
type cost struct {
	source     string  // "measured" or "documented"
	redisCPU   float64 // one redis-server, µs per acquisition and release
	redlockCPU float64 // a Redlock, summed over its redlockN nodes
	redlockN   int
	scriptCPU  float64 // one short script, µs: a lock-free step
	roundTrip  float64 // µs
	dbRate     float64 // acquisitions/s one database carries
	consensus  float64 // acquisitions/s one ensemble carries
}

// documentedCost is the cost when nothing is measured.
func documentedCost() cost {
	return cost{source: "documented", redisCPU: docRedisCPU, redlockCPU: docRedlockCPU, redlockN: docRedlockNodes,
		scriptCPU: docScriptCPU, roundTrip: docRoundTrip, dbRate: tableDB, consensus: consensusWrites / writesPerAcquisition}
}

// redisCap is what one redis-server carries at the headroom, in
// acquisitions per second.
func (c cost) redisCap() float64 { return headroom * 1e6 / c.redisCPU }

// redlockNodeCPU is what one node of a Redlock spends per acquisition:
// every node sees every acquisition, so a Redlock of any size carries
// what one of its nodes does.
func (c cost) redlockNodeCPU() float64 { return c.redlockCPU / float64(c.redlockN) }

func (c cost) redlockCap() float64 { return headroom * 1e6 / c.redlockNodeCPU() }

// redisBound is the most acquisitions per second the Redis row takes: the
// table's bound for a server that was not measured, and what a measured
// one carries for one that was.
func (c cost) redisBound() float64 {
	if c.source == "measured" {
		return c.redisCap()
	}
	return tableRedis
}

// hotKeyLimit is the most times a second one key can be locked: one
// hold and one handoff after another.
func (c cost) hotKeyLimit(holdMicros float64) float64 {
	return 1e6 / (holdMicros + handoffRoundTrips*c.roundTrip)
}

// thousands writes n as the docs do: 100, 1,000, 100,000.
func thousands(n float64) string {
	s := strconv.FormatInt(int64(n), 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

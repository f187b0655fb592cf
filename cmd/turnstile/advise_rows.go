package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Why the row was picked, for the runner-up's reasons.
const (
	becauseRate      = "rate"
	becauseHotKey    = "hot-key"
	becauseOperation = "operation"
	becauseSafety    = "safety"
	becauseStores    = "stores"
)

const fencingReason = "fencing is mandatory: pass Lease.Token() to the storage you write to (package fence) so that a paused holder's late write is refused"

// pickRow picks the row of the load table for in, with its reasons and
// what decided it. Rows are picked by lock requests (acquisitions and
// the watchdog's renewals): both are calls to the store.
func pickRow(in *adviseInput, d demand, c cost) (row string, reasons []string, because string) {
	load := d.describe(in.hold)
	money := in.Safety == "money"
	hasDB := in.has("postgres") || in.has("mysql")
	hasConsensus := in.has("etcd") || in.has("zookeeper")

	switch {
	case d.hotTooHot:
		return rowLockFree, append([]string{fmt.Sprintf(
			"the hottest key takes %s acquisitions/s (%s %% of %s), and one key can be locked at most %s times a second (1 ÷ (hold %v + handoff of %d round trips)): a lock on it would queue without end; %s",
			fmtRate(d.hot), fmtShare(in.HotKeyShare), fmtRate(d.rate), fmtRate(d.hotLimit), in.hold, handoffRoundTrips, lockFreeHow(in))}, lockFreeWhat(in)...), becauseHotKey
	case in.Operation == opStock:
		return rowLockFree, append([]string{
			"a stock decrement is one atomic step on the server that holds the stock: no lock is needed, and none can oversell (docs/backends.md: lock-free first)"},
			lockFreeWhat(in)...), becauseOperation
	case d.requests >= tableLockFree:
		return rowLockFree, append([]string{fmt.Sprintf(
			"%s is at or above the table's %s: a lock serialises the whole critical section, round trips included; %s", load, thousands(tableLockFree), lockFreeHow(in))},
			lockFreeWhat(in)...), becauseRate
	}

	// A lock it is: the table's row for the load, then safety and the
	// stores the team runs.
	switch {
	case d.requests <= tableMutex:
		row = rowMutex
		reasons = []string{fmt.Sprintf("%s is within the table's %s: one database transaction (SELECT … FOR UPDATE) serialises it, or a mutex when one process does the work", load, tableRows[rowMutex].load)}
	case d.requests <= tableDB:
		row = rowDB
		reasons = []string{fmt.Sprintf("%s is within the table's %s: the database you run holds the locks, no extra infrastructure", load, tableRows[rowDB].load)}
	case d.requests <= c.redisBound() && c.source == "measured":
		row = rowRedis
		reasons = []string{fmt.Sprintf("%s is within what your Redis carries: ~%s/s at %.0f %% of its core, measured (the table's %s is for a server not measured)", load, fmtRate(c.redisCap()), headroom*100, thousands(tableRedis))}
	case d.requests <= c.redisBound():
		row = rowRedis
		reasons = []string{fmt.Sprintf("%s is within the table's %s: one Redis answers in under a millisecond", load, tableRows[rowRedis].load)}
	default:
		row = rowRedlock
		above := fmt.Sprintf("in the table's %s", tableRows[rowRedlock].load)
		if c.source == "measured" {
			above = fmt.Sprintf("above what your Redis carries (~%s/s at %.0f %% of its core, measured) and below the table's %s", fmtRate(c.redisCap()), headroom*100, thousands(tableLockFree))
		}
		reasons = []string{fmt.Sprintf("%s is %s: %s; a Redlock survives the loss of a minority of its nodes", load, above, redlocksCarry(d, c))}
	}
	because = becauseRate

	if money && hasConsensus && d.requests <= c.consensus && row != rowMutex {
		return rowConsensus, []string{
			fmt.Sprintf("--safety money: a consensus store (%s, which you run) keeps a lock through leader changes and restarts, and its token is a cluster-wide revision that only grows", runs(in, "etcd", "zookeeper")),
			fmt.Sprintf("%s is within what one ensemble carries (~%s/s: ~%s writes/s, %d per acquisition)", load, fmtRate(c.consensus), thousands(consensusWrites), writesPerAcquisition),
			fencingReason,
		}, becauseSafety
	}

	// The stores the team runs.
	switch row {
	case rowDB:
		if !hasDB {
			switch {
			case in.has("redis"):
				row, because = rowRedis, becauseStores
				reasons = []string{fmt.Sprintf("the table's row for %s is a DB advisory lock, but --stores has no PostgreSQL or MySQL; the Redis you run carries it with room to spare", load)}
			case hasConsensus:
				return rowConsensus, []string{fmt.Sprintf("the table's row for %s is a DB advisory lock, but --stores has no PostgreSQL or MySQL; the %s you run carries it", load, runs(in, "etcd", "zookeeper"))}, becauseStores
			default:
				reasons = append(reasons, "--stores lists none of the stores it needs: deploy PostgreSQL or MySQL")
			}
		}
	case rowRedis, rowRedlock:
		if !in.has("redis") {
			if hasConsensus && d.requests <= c.consensus {
				return rowConsensus, []string{fmt.Sprintf("--stores has no Redis; the %s you run carries %s (one ensemble: ~%s/s)", runs(in, "etcd", "zookeeper"), load, fmtRate(c.consensus))}, becauseStores
			}
			nodes := "one Redis"
			if row == rowRedlock || money { // money takes a Redlock, below
				nodes = "the preset's Redis servers (independent, no replication between them)"
			}
			reasons = append(reasons, "--stores has no Redis: deploy "+nodes+"; nothing you run carries this load as a lock")
		}
	}

	switch {
	case money && row == rowRedis:
		why := fmt.Sprintf("--safety money: one Redis loses a lock held during a failover to a lagging replica (a double payment); a Redlock of %d nodes does not: %s", docRedlockNodes, redlocksCarry(d, c))
		if because == becauseStores {
			reasons = append(reasons, why)
		} else {
			reasons, because = []string{why}, becauseSafety
		}
		row = rowRedlock
		reasons = append(reasons, fencingReason)
	case money:
		reasons = append(reasons, "--safety money: "+fencingReason)
	}
	if row == rowRedlock {
		if n, _ := partition(d.requests, d.hotRequests(), c.redlockCap(), 1); n > maxRedlocks {
			return rowLockFree, append([]string{fmt.Sprintf(
				"%s as locks needs %d Redlocks (one carries ~%s/s), more than the %d a plan partitions keys between: %s", load, n, fmtRate(c.redlockCap()), maxRedlocks, lockFreeHow(in))},
				lockFreeWhat(in)...), becauseRate
		}
	}
	if in.Operation == opPayment {
		reasons = append(reasons, "a payment also needs an idempotency key (package idempotency): the lock serialises different requests on one order, the key makes a client's retry of one request return the first charge's result")
	}
	if in.Operation == opJob && hasDB {
		reasons = append(reasons, "for a job queue in PostgreSQL or MySQL, SELECT … FOR UPDATE SKIP LOCKED hands each job to one worker without a lock (package claim's PostgresJobs, MySQLJobs)")
	}
	return row, reasons, because
}

// redlocksCarry says how many Redlocks carry d: "one Redlock carries it
// (~25,926/s)" or "2 Redlocks carry it (~25,926/s each), the keys
// partitioned between them".
func redlocksCarry(d demand, c cost) string {
	n, _ := partition(d.requests, d.hotRequests(), c.redlockCap(), 1)
	if n == 1 {
		return fmt.Sprintf("one Redlock carries it (~%s/s)", fmtRate(c.redlockCap()))
	}
	return fmt.Sprintf("%d Redlocks carry it (~%s/s each), the keys partitioned between them", n, fmtRate(c.redlockCap()))
}

// lockFreeHow says what replaces the lock for in's operation.
func lockFreeHow(in *adviseInput) string {
	switch in.Operation {
	case opStock:
		return "decrement the stock atomically instead"
	case opPayment:
		return "make the charge idempotent instead (a key per request, UNIQUE in the store) and keep locks for what cannot be"
	case opJob:
		return "hand jobs out with SELECT … FOR UPDATE SKIP LOCKED or a conditional UPDATE instead"
	}
	return "make the step one conditional write (UPDATE … WHERE used = false, an atomic DECR, an idempotency key with UNIQUE) and take locks last"
}

// lockFreeWhat names the turnstile packages and calls of the lock-free
// row for in's operation and stores.
func lockFreeWhat(in *adviseInput) []string {
	redis, pg := in.has("redis"), in.has("postgres")
	var out []string
	switch in.Operation {
	case opStock:
		switch {
		case redis && in.HotKeyShare > 0:
			out = append(out, "package stock: Sharded (N keys of one item in one hash slot, one short script per order, never below zero) or Counter (one DECRBY per order)")
		case redis:
			out = append(out, "package stock: Counter (one DECRBY per order, one round trip) on the Redis you run")
		case pg:
			out = append(out, "package stock: CAS (one PostgreSQL row with CHECK (quantity >= 0), compare-and-set)")
		default:
			out = append(out, "package stock: Counter or Sharded need Redis, CAS PostgreSQL: deploy one of them")
		}
	case opPayment:
		switch {
		case redis:
			out = append(out, "package idempotency: NewRedis (SET NX claims each request id)")
		case pg:
			out = append(out, "package idempotency: NewPostgres (an INSERT guarded by the primary key claims each request id)")
		default:
			out = append(out, "package idempotency needs Redis or PostgreSQL: deploy one of them")
		}
	case opJob:
		switch {
		case pg:
			out = append(out, "package claim: PostgresJobs (SELECT … FOR UPDATE SKIP LOCKED; each claim's attempt is its fencing token)")
		case in.has("mysql"):
			out = append(out, "package claim: MySQLJobs (SELECT … FOR UPDATE SKIP LOCKED, MySQL 8.0+ or MariaDB 10.6+)")
		default:
			out = append(out, "package claim's job queues need PostgreSQL or MySQL: deploy one of them")
		}
	default:
		if redis {
			out = append(out, "on the Redis you run: package stock's Counter (atomic DECRBY) for counts, package idempotency for once-per-request work, package claim's RedisCoupons for once-only items")
		}
		if !redis && !pg && !in.has("mysql") {
			out = append(out, "deploy Redis for atomic steps: package stock's Counter (atomic DECRBY), package idempotency, package claim's RedisCoupons")
		}
		if pg || in.has("mysql") {
			out = append(out, "in the database you run: UPDATE … SET used = true WHERE id = $1 AND used = false (one row changed: you won; package claim's coupons), or INSERT with a UNIQUE key")
		}
	}
	return out
}

// runs names which of stores the team runs (or may deploy).
func runs(in *adviseInput, stores ...string) string {
	var have []string
	for _, s := range stores {
		if in.Stores != nil && in.has(s) {
			have = append(have, storeTitle(s))
		}
	}
	if len(have) == 0 {
		for _, s := range stores {
			have = append(have, storeTitle(s))
		}
		return strings.Join(have, " or ")
	}
	return strings.Join(have, " and ")
}

func storeTitle(s string) string {
	switch s {
	case "etcd":
		return "etcd"
	case "zookeeper":
		return "ZooKeeper"
	case "postgres":
		return "PostgreSQL"
	case "mysql":
		return "MySQL"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// fmtShare writes a share as a percentage: 40, 2.5, 0.01.
func fmtShare(share float64) string { return strconv.FormatFloat(share*100, 'g', 3, 64) }

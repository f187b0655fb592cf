package main

import "fmt"

// runnerUp is the row that came closest to row, and why it was not
// picked.
func runnerUp(in *adviseInput, d demand, row, because string, c cost) choice {
	load := fmtRate(d.requests) + "/s"
	money := in.Safety == "money"
	redlock5CPU := c.redlockNodeCPU() * docRedlockNodes
	switch row {
	case rowMutex:
		return rowChoice(rowDB, []string{fmt.Sprintf("an advisory lock adds a lock row and pinned connections; at %s a plain transaction, or a mutex in one process, already serialises the work", load)})
	case rowDB:
		return rowChoice(rowRedis, []string{fmt.Sprintf("a Redis is one more store to run and watch; at %s the database carries the locks", load)})
	case rowRedis:
		if because == becauseStores {
			return rowChoice(rowDB, []string{"--stores has no PostgreSQL or MySQL"})
		}
		return rowChoice(rowRedlock, []string{
			fmt.Sprintf("%d servers, and each acquisition costs them %.1f µs of CPU against one Redis's %.1f µs", docRedlockNodes, redlock5CPU, c.redisCPU),
			"it survives a failover that loses a single Redis's lock: choose it with --safety money"})
	case rowRedlock:
		if money {
			why := []string{fmt.Sprintf("one etcd or ZooKeeper ensemble carries ~%s acquisitions/s, below %s", fmtRate(c.consensus), load)}
			if d.requests <= c.consensus {
				why = []string{"--stores has no etcd or ZooKeeper"}
			}
			return rowChoice(rowConsensus, why)
		}
		if c.source == "measured" {
			return rowChoice(rowRedis, []string{fmt.Sprintf("your Redis carries ~%s/s at %.0f %% of its core (measured), below %s", fmtRate(c.redisCap()), headroom*100, load)})
		}
		return rowChoice(rowRedis, []string{fmt.Sprintf("the table gives one Redis up to %s/s (one server core carries ~%s/s at %.0f %% headroom), and a failover to a lagging replica loses its locks",
			thousands(tableRedis), fmtRate(c.redisCap()), headroom*100)})
	case rowConsensus:
		return rowChoice(rowRedlock, []string{
			fmt.Sprintf("sub-millisecond and up to ~%s acquisitions/s per Redlock, but its safety rests on bounded clock drift and pauses (docs/guarantees.md); a consensus store's revision does not", fmtRate(c.redlockCap())),
			fmt.Sprintf("it is %d more servers when you already run a consensus store", docRedlockNodes)})
	}
	// Lock-free: the lock that would otherwise serve.
	switch {
	case because == becauseOperation && d.requests <= c.redisBound():
		lockRow := rowRedis
		if d.requests <= tableDB && (in.has("postgres") || in.has("mysql")) {
			lockRow = rowDB
		}
		return rowChoice(lockRow, []string{"a lock around read-check-write works at this rate, but costs two more round trips per order and a lock store; the atomic step alone cannot oversell"})
	case because == becauseHotKey:
		return rowChoice(rowRedlock, []string{fmt.Sprintf("any lock serialises the hottest key: at most %s acquisitions/s on it however many servers run", fmtRate(d.hotLimit))})
	}
	n, _ := partition(d.requests, d.hotRequests(), c.redlockCap(), 1)
	return rowChoice(rowRedlock, []string{fmt.Sprintf("%s as locks would need %d Redlocks (one carries ~%s/s at %.0f %% headroom), partitioned by key in your code; locks last",
		load, n, fmtRate(c.redlockCap()), headroom*100)})
}

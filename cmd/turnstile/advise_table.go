package main

import (
	"fmt"
	"strings"
)

// The rows of the load table in docs/backends.md, by the id --json gives
// them.
const (
	rowMutex     = "mutex"
	rowDB        = "db-advisory"
	rowRedis     = "redis"
	rowRedlock   = "redlock"
	rowConsensus = "consensus"
	rowLockFree  = "lock-free"
)

// tableRow is a row of the load table as docs/backends.md writes it:
// TestAdviseTableInDocs finds each in the docs' table.
type tableRow struct{ load, choice, turnstile string }

// tableRows are the rows of the load table: what fits, and what of
// turnstile gives it. Their bounds are the figures the advisor picks
// rows with.
var tableRows = map[string]tableRow{
	rowMutex:     {"≤ " + thousands(tableMutex), "in-process mutex or a DB transaction", "`mem://` (one process only)"},
	rowDB:        {"≤ " + thousands(tableDB), "DB advisory lock, no extra infrastructure", "`postgres://`, `mysql://`"},
	rowRedis:     {"≤ " + thousands(tableRedis), "one Redis, SET NX + watchdog", "`redis://`"},
	rowRedlock:   {thousands(tableRedis) + "–" + thousands(tableLockFree), fmt.Sprintf("Redlock over %d nodes + fencing", docRedlockNodes), "`redlock://`"},
	rowConsensus: {"any, safety first", fmt.Sprintf("consensus store, ms latency, ~%gk writes/s", consensusWrites/1000), "`etcd://`, `zookeeper://`"},
	rowLockFree:  {"≥ " + thousands(tableLockFree), "lock-free first (atomic DECR, idempotency keys, `UPDATE … WHERE`, `SKIP LOCKED` queues), locks last", "`stock`, `idempotency`, `claim`"},
}

// markdown is the row as a line of the docs' table.
func (r tableRow) markdown() string {
	return "| " + r.load + " | " + r.choice + " | " + r.turnstile + " |"
}

// rowChoice is row's cells, as --json gives them, with reasons.
func rowChoice(row string, reasons []string) choice {
	r := tableRows[row]
	plain := func(s string) string { return strings.ReplaceAll(s, "`", "") }
	return choice{Row: row, Load: r.load, Choice: plain(r.choice), Turnstile: plain(r.turnstile), Reasons: reasons}
}

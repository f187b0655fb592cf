package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The documented figures "turnstile advise" sizes with when it does not
// measure (docs/performance.md, docs/backends.md).
const (
	// docRedisCPU is the server CPU time of one acquisition and its
	// release on one redis-server, in µs: 12.8–14.5 measured at 64–256
	// workers.
	docRedisCPU = 14.0
	// docRedlockCPU is the same for a Redlock of docRedlockNodes, summed
	// over its nodes: 133–135 µs.
	docRedlockCPU   = 134.0
	docRedlockNodes = 5
	// docRoundTrip is the round trip assumed between client and store,
	// in µs: within one data centre (loopback measures 25–78 µs).
	docRoundTrip = 250.0
	// handoffRoundTrips is how many round trips passing a held key to
	// its next waiter takes: the measured handoff gap (184–188 µs) over
	// the round trip of the same run (51–78 µs) is about 3.
	handoffRoundTrips = 3
	// headroom is the share of a server core, or of a store's
	// documented capacity, a plan may use: the rest absorbs peaks,
	// renewals and the store's own work.
	headroom = 0.7
	// docDBRate is what one database carries in advisory locks before
	// its connection pool becomes the limit (the load table's 1,000).
	docDBRate = 1000.0
	// docConsensusRate is what one etcd or ZooKeeper ensemble carries:
	// ~10,000 writes/s, two writes (grant, delete) per acquisition.
	docConsensusRate = 5000.0
	// The load table's bounds, in acquisitions per second.
	tableMutex   = 100.0
	tableDB      = 1000.0
	tableRedis   = 10000.0
	tableRedlock = 100000.0
	// defaultLeaseTTL and the watchdog's renewal every TTL/3.
	defaultLeaseTTL = 30 * time.Second
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

// tableRows are the rows of the load table: what fits, and what of
// turnstile gives it.
var tableRows = map[string]struct{ load, choice, turnstile string }{
	rowMutex:     {"≤ 100/s", "in-process mutex or a DB transaction", "mem:// (one process only)"},
	rowDB:        {"≤ 1,000/s", "DB advisory lock, no extra infrastructure", "postgres://, mysql://"},
	rowRedis:     {"≤ 10,000/s", "one Redis, SET NX + watchdog", "redis://"},
	rowRedlock:   {"10,000–100,000/s", "Redlock over 5 nodes + fencing", "redlock://"},
	rowConsensus: {"any, safety first", "consensus store, ms latency, ~10k writes/s", "etcd://, zookeeper://"},
	rowLockFree:  {"≥ 100,000/s", "lock-free first (atomic DECR, idempotency keys, UPDATE … WHERE, SKIP LOCKED queues), locks last", "packages stock, idempotency, claim"},
}

// advice is what "turnstile advise" prints; its JSON form is --json's
// output, whose field names are stable (docs/cli.md).
type advice struct {
	Input          adviseInput `json:"input"`
	Recommendation choice      `json:"recommendation"`
	RunnerUp       choice      `json:"runner_up"`
	Preset         preset      `json:"preset"`
	Capacity       capacity    `json:"capacity"`
	Alerts         []alert     `json:"alerts"`
	Notes          []string    `json:"notes"`
}

// choice is a row of the load table with the reasons for it (the
// recommendation) or against it (the runner-up).
type choice struct {
	Row       string   `json:"row"`
	Load      string   `json:"load"`
	Choice    string   `json:"choice"`
	Turnstile string   `json:"turnstile"`
	Reasons   []string `json:"reasons"`
}

// preset is the configuration to deploy: a Redis deployment phase (1–4;
// 0 when the recommended store is not Redis), its URL, the Go options
// beside it, and what else the code needs.
type preset struct {
	Phase   int      `json:"phase"`
	Name    string   `json:"name"`
	URL     string   `json:"url"`
	Options []string `json:"options"`
	Also    []string `json:"also"`
}

// capacity is the sizing of the store for the load.
type capacity struct {
	// Source is "measured" (--backend) or "documented".
	Source string `json:"source"`
	// Store is what the figures are for: "redis", "redlock-5", "etcd",
	// "postgres", ... (the recommended store).
	Store string `json:"store"`
	// ServerCPUMicrosPerAcq is the server CPU time of one acquisition
	// and its release, summed over the nodes; 0 when not known.
	ServerCPUMicrosPerAcq float64 `json:"server_cpu_us_per_acq"`
	RoundTripMicros       float64 `json:"round_trip_us"`
	// StoreCores is the server cores the load keeps busy (rate × CPU
	// per acquisition); 0 when not known.
	StoreCores float64 `json:"store_cores"`
	// PerGroupRate is what one server (one Redlock, one ensemble, one
	// database) carries at the headroom, in acquisitions per second.
	PerGroupRate float64 `json:"per_group_rate"`
	// Groups is how many of those the load needs (Redis Cluster
	// masters for Redis), Nodes how many servers that is.
	Groups   int     `json:"groups"`
	Nodes    int     `json:"nodes"`
	Headroom float64 `json:"headroom"`
	// LocksHeld is the locks held at once on average (rate × hold),
	// InFlight the acquisitions under way or held at once (rate × (hold +
	// 2 round trips)): the client concurrency the load needs.
	LocksHeld float64 `json:"locks_held"`
	InFlight  float64 `json:"in_flight"`
	// RenewalsPerSecond are the watchdog's renewals (leases held past a
	// third of the default TTL are renewed every third of it).
	RenewalsPerSecond float64 `json:"renewals_per_s"`
	// HotKeyRate is the acquisitions per second of the hottest key,
	// HotKeyLimit the most one key can be locked per second (1 ÷ (hold +
	// handoff)).
	HotKeyRate  float64 `json:"hot_key_rate"`
	HotKeyLimit float64 `json:"hot_key_limit"`
	// AcquireMicros is the expected uncontended acquisition time.
	AcquireMicros float64 `json:"acquire_us"`
	// Fits says whether one group (one server, Redlock, ensemble or
	// database) carries the load at the headroom.
	Fits bool `json:"fits"`
}

// alert is an alert of deploy/prometheus/alerts.yml to deploy, and why.
type alert struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// cost is what an acquisition costs the store: measured, or documented.
type cost struct {
	source     string
	redisCPU   float64 // one redis-server, µs per acquisition
	redlockCPU float64 // a Redlock, summed over redlockNodes
	redlockN   int
	roundTrip  float64 // µs
}

// documentedCost is the cost when nothing is measured.
func documentedCost() cost {
	return cost{source: "documented", redisCPU: docRedisCPU, redlockCPU: docRedlockCPU, redlockN: docRedlockNodes, roundTrip: docRoundTrip}
}

// adviseCmd implements "turnstile advise".
func adviseCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	in, err := parseAdvise(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, adviseUsage())
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "turnstile advise: %v\nRun \"turnstile advise -h\" for usage.\n", err)
		return exitUsage
	}
	c := documentedCost()
	if in.backend != "" {
		var code int
		if c, code = measureCost(ctx, in, stderr); code != exitOK {
			return code
		}
	}
	a := advise(in, c)
	if in.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(a); err != nil {
			fmt.Fprintf(stderr, "turnstile advise: %v\n", err)
			return 1
		}
		return exitOK
	}
	if err := a.writeTable(stdout); err != nil {
		fmt.Fprintf(stderr, "turnstile advise: %v\n", err)
		return 1
	}
	return exitOK
}

// advise works out the advice for in with the store costs c.
func advise(in *adviseInput, c cost) advice {
	a := advice{Input: *in, Notes: []string{}}
	hotRate := in.Rate * in.HotKeyShare
	hotLimit := 1e6 / (in.HoldMicros + handoffRoundTrips*c.roundTrip)
	hotTooHot := in.HotKeyShare > 0 && hotRate > headroom*hotLimit

	row, reasons, because := pickRow(in, hotRate, hotLimit, hotTooHot)
	a.Recommendation = rowChoice(row, reasons)
	a.RunnerUp = runnerUp(in, row, because, c)
	a.Preset = pickPreset(in, row)
	a.Capacity = size(in, row, a.Preset, c, hotRate, hotLimit)
	a.Alerts = pickAlerts(in, row, a.Preset)
	a.Notes = append(a.Notes, notes(in, row, a.Capacity)...)
	return a
}

// Why the row was picked, for the runner-up's reasons.
const (
	becauseRate      = "rate"
	becauseHotKey    = "hot-key"
	becauseOperation = "operation"
	becauseSafety    = "safety"
	becauseStores    = "stores"
)

// pickRow picks the row of the load table for in, with its reasons and
// what decided it.
func pickRow(in *adviseInput, hotRate, hotLimit float64, hotTooHot bool) (row string, reasons []string, because string) {
	rate := fmtRate(in.Rate)
	money := in.Safety == "money"
	hasDB := in.has("postgres") || in.has("mysql")
	hasConsensus := in.has("etcd") || in.has("zookeeper")

	switch {
	case hotTooHot:
		return rowLockFree, append([]string{fmt.Sprintf(
			"the hottest key takes %s acquisitions/s (%s %% of %s), and one key can be locked at most %s times a second (1 ÷ (hold %v + handoff)): a lock on it would queue without end; %s",
			fmtRate(hotRate), strconv.FormatFloat(in.HotKeyShare*100, 'g', 3, 64), rate, fmtRate(hotLimit), in.hold, lockFreeHow(in))}, lockFreeWhat(in)...), becauseHotKey
	case in.Operation == opStock:
		return rowLockFree, append([]string{
			"a stock decrement is one atomic step on the server that holds the stock: no lock is needed, and none can oversell (docs/backends.md: lock-free first)"},
			lockFreeWhat(in)...), becauseOperation
	case in.Rate >= tableRedlock:
		return rowLockFree, append([]string{fmt.Sprintf(
			"%s acquisitions/s is at or above the table's 100,000: a lock serialises the whole critical section, round trips included; %s", rate, lockFreeHow(in))},
			lockFreeWhat(in)...), becauseRate
	}

	// A lock it is: the table's row for the rate, then safety and the
	// stores the team runs.
	switch {
	case in.Rate <= tableMutex:
		row = rowMutex
		reasons = []string{fmt.Sprintf("%s acquisitions/s is within the table's ≤ 100: one database transaction (SELECT … FOR UPDATE) serialises it, or a mutex when one process does the work", rate)}
	case in.Rate <= tableDB:
		row = rowDB
		reasons = []string{fmt.Sprintf("%s acquisitions/s is within the table's ≤ 1,000: the database you run holds the locks, no extra infrastructure", rate)}
	case in.Rate <= tableRedis:
		row = rowRedis
		reasons = []string{fmt.Sprintf("%s acquisitions/s is within the table's ≤ 10,000: one Redis answers in under a millisecond", rate)}
	default:
		row = rowRedlock
		reasons = []string{fmt.Sprintf("%s acquisitions/s is in the table's 10,000–100,000: a Redlock carries it, and survives the loss of a minority of its nodes", rate)}
	}
	because = becauseRate

	if money && hasConsensus && in.Rate <= docConsensusRate && row != rowMutex {
		return rowConsensus, []string{
			fmt.Sprintf("--safety money: a consensus store (%s, which you run) keeps a lock through leader changes and restarts, and its token is a cluster-wide revision that only grows", runs(in, "etcd", "zookeeper")),
			fmt.Sprintf("%s acquisitions/s is within what one ensemble carries (~%s/s: ~10k writes/s, two per acquisition)", rate, fmtRate(docConsensusRate)),
			"fencing is mandatory: pass Lease.Token() to the storage you write to (package fence) so that a paused holder's late write is refused",
		}, becauseSafety
	}
	if money && row == rowRedis {
		reasons = []string{
			fmt.Sprintf("--safety money: one Redis loses a lock held during a failover to a lagging replica (a double payment); a Redlock of 5 nodes does not, and %s acquisitions/s is well within it", rate),
			"fencing is mandatory: pass Lease.Token() to the storage you write to (package fence) so that a paused holder's late write is refused",
		}
		return rowRedlock, reasons, becauseSafety
	}
	if money {
		reasons = append(reasons, "--safety money: fencing is mandatory: pass Lease.Token() to the storage you write to (package fence) so that a paused holder's late write is refused")
	}

	// The stores the team runs.
	switch row {
	case rowDB:
		if !hasDB {
			if in.has("redis") {
				return rowRedis, []string{fmt.Sprintf("the table's row for %s/s is a DB advisory lock, but --stores has no PostgreSQL or MySQL; the Redis you run carries %s/s with room to spare", rate, rate)}, becauseStores
			}
			if hasConsensus {
				return rowConsensus, []string{fmt.Sprintf("the table's row for %s/s is a DB advisory lock, but --stores has no PostgreSQL or MySQL; the %s you run carries %s/s", rate, runs(in, "etcd", "zookeeper"), rate)}, becauseStores
			}
			reasons = append(reasons, "--stores lists none of the stores it needs: deploy PostgreSQL or MySQL")
		}
	case rowRedis, rowRedlock:
		if !in.has("redis") {
			if hasConsensus && in.Rate <= docConsensusRate {
				return rowConsensus, []string{fmt.Sprintf("--stores has no Redis; the %s you run carries %s acquisitions/s (one ensemble: ~%s/s)", runs(in, "etcd", "zookeeper"), rate, fmtRate(docConsensusRate))}, becauseStores
			}
			if row == rowRedis && hasDB && in.Rate <= headroom*2*tableDB {
				return rowDB, []string{fmt.Sprintf("--stores has no Redis; %s acquisitions/s is near the table's 1,000 for a database lock: the database you run can carry it with lock_conns raised, watch its connections", rate)}, becauseStores
			}
			nodes := "one Redis"
			if row == rowRedlock {
				nodes = "5 Redis servers (independent, no replication between them)"
			}
			reasons = append(reasons, "--stores has no Redis: deploy "+nodes+"; nothing you run carries this load as a lock")
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
			out = append(out, "package stock: CAS (one PostgreSQL row with CHECK (quantity >= 0), compare-and-set; about 1,000 orders/s on one item)")
		default:
			out = append(out, "package stock: Counter or Sharded need Redis, CAS PostgreSQL: deploy one of them")
		}
	case opPayment:
		switch {
		case pg:
			out = append(out, "package idempotency: NewPostgres (an INSERT guarded by the primary key claims each request id)")
		case redis:
			out = append(out, "package idempotency: NewRedis (SET NX claims each request id)")
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
		if pg || in.has("mysql") {
			out = append(out, "in the database you run: UPDATE … SET used = true WHERE id = $1 AND used = false (one row changed: you won; package claim's coupons), or INSERT with a UNIQUE key")
		}
		if redis {
			out = append(out, "on the Redis you run: package stock's Counter (atomic DECRBY) for counts, package idempotency for once-per-request work, package claim's RedisCoupons for once-only items")
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

func rowChoice(row string, reasons []string) choice {
	r := tableRows[row]
	return choice{Row: row, Load: r.load, Choice: r.choice, Turnstile: r.turnstile, Reasons: reasons}
}

// runnerUp is the row that came closest to row, and why it was not
// picked.
func runnerUp(in *adviseInput, row, because string, c cost) choice {
	rate := fmtRate(in.Rate)
	money := in.Safety == "money"
	redisCap := headroom * 1e6 / c.redisCPU
	redlockCap := headroom * 1e6 / (c.redlockCPU / float64(c.redlockN))
	switch row {
	case rowMutex:
		return rowChoice(rowDB, []string{fmt.Sprintf("an advisory lock adds a lock row and pinned connections; at %s/s a plain transaction, or a mutex in one process, already serialises the work", rate)})
	case rowDB:
		return rowChoice(rowRedis, []string{fmt.Sprintf("a Redis is one more store to run and watch; at %s/s the database carries the locks", rate)})
	case rowRedis:
		if because == becauseStores {
			return rowChoice(rowDB, []string{"--stores has no PostgreSQL or MySQL"})
		}
		return rowChoice(rowRedlock, []string{
			fmt.Sprintf("5 servers, and each acquisition costs them %.0f µs of CPU against one Redis's %.0f µs", c.redlockCPU, c.redisCPU),
			"it survives a failover that loses a single Redis's lock: choose it with --safety money"})
	case rowRedlock:
		if money {
			why := []string{fmt.Sprintf("one etcd or ZooKeeper ensemble carries ~%s acquisitions/s, below %s/s", fmtRate(docConsensusRate), rate)}
			if in.Rate <= docConsensusRate {
				why = []string{"--stores has no etcd or ZooKeeper"}
			}
			return rowChoice(rowConsensus, why)
		}
		if because == becauseStores {
			return rowChoice(rowRedis, []string{"--stores has no Redis either: a Redlock needs 5 of them"})
		}
		return rowChoice(rowRedis, []string{fmt.Sprintf("the table gives one Redis up to 10,000/s (one server core carries ~%s/s at %.0f %% headroom), and a failover to a lagging replica loses its locks", fmtRate(redisCap), headroom*100)})
	case rowConsensus:
		return rowChoice(rowRedlock, []string{
			fmt.Sprintf("sub-millisecond and up to ~%s acquisitions/s per Redlock, but its safety rests on bounded clock drift and pauses (docs/guarantees.md); a consensus store's revision does not", fmtRate(redlockCap)),
			"it is 5 more servers when you already run a consensus store"})
	}
	// Lock-free: the lock that would otherwise serve.
	switch {
	case because == becauseOperation && in.Rate <= tableRedis:
		lockRow := rowRedis
		if in.Rate <= tableDB && (in.has("postgres") || in.has("mysql")) {
			lockRow = rowDB
		}
		return rowChoice(lockRow, []string{"a lock around read-check-write works at this rate, but costs two more round trips per order and a lock store; the atomic step alone cannot oversell"})
	case because == becauseHotKey:
		return rowChoice(rowRedlock, []string{fmt.Sprintf("any lock serialises the hottest key: at most %s acquisitions/s on it however many servers run", fmtRate(1e6/(in.HoldMicros+handoffRoundTrips*c.roundTrip)))})
	}
	return rowChoice(rowRedlock, []string{fmt.Sprintf("%s/s as locks would need %.1f Redlock groups of %d nodes (one carries ~%s/s at %.0f %% headroom), partitioned by key in your code; locks last",
		rate, in.Rate/redlockCap, c.redlockN, fmtRate(redlockCap), headroom*100)})
}

// pickPreset is the configuration to deploy for row.
func pickPreset(in *adviseInput, row string) preset {
	money := in.Safety == "money"
	hasDB := in.has("postgres") || in.has("mysql")
	ttl := phase1TTL(in.hold)
	switch row {
	case rowMutex:
		if hasDB && in.Stores != nil {
			return dbPreset(in, "a DB transaction, or the database lock")
		}
		return preset{Name: "in one process", URL: "mem://", Options: []string{}, Also: []string{"a DB transaction (SELECT … FOR UPDATE) when several processes do the work"}}
	case rowDB:
		return dbPreset(in, "database advisory lock")
	case rowConsensus:
		if in.has("etcd") {
			return preset{Name: "etcd", URL: "etcd://etcd1:2379,etcd2:2379,etcd3:2379", Options: []string{}, Also: []string{"fence.Check the token (Lease.Token()) in the storage you write to"}}
		}
		return preset{Name: "ZooKeeper", URL: "zookeeper://zk1:2181,zk2:2181,zk3:2181?session_timeout=30s", Options: []string{}, Also: []string{"fence.Check the token (Lease.Token()) in the storage you write to"}}
	case rowRedis:
		return preset{Phase: 1, Name: "phase 1: one Redis, SET NX, fixed TTL", URL: "redis://redis1:6379/0",
			Options: []string{"turnstile.WithTTL(" + goDuration(ttl) + ")", "turnstile.WithoutWatchdog()"},
			Also:    []string{fmt.Sprintf("the lease ends by itself after %v: keep it above your longest hold (not the average), or drop WithoutWatchdog to have it renewed", ttl)}}
	}
	if row == rowLockFree {
		return lockFreePreset(in)
	}
	redlock5 := "redlock://redis1:6379,redis2:6379,redis3:6379,redis4:6379,redis5:6379"
	switch {
	case money && hasDB && in.has("kafka"):
		secondary := "postgres://turnstile@db:5432/locks"
		if !in.has("postgres") {
			secondary = "mysql://turnstile@db:3306/locks"
		}
		return preset{Phase: 4, Name: "phase 4: phase 3 + Kafka events + circuit breaker + database fallback",
			URL:     "fallback://?primary=" + redlock5 + "&secondary=" + url.QueryEscape(secondary),
			Options: []string{`turnstile.WithObserver(kafka) // kafka, _ := events.NewKafka([]string{"kafka1:9092"})`},
			Also: []string{
				"the breaker sends new locks to the database after 5 failed calls (trip_after) and back when Redis recovers; each switch waits out a grace (31 s, at least the TTL) so a key never has two holders",
				"lock events go to the Kafka topic lock-events, never blocking a lock; watch turnstile_events_dropped_total",
				"fence.Check the token (Lease.Token()) in the storage you write to",
			}}
	case money || in.HotKeyShare > 0 || in.Rate > headroom*tableRedlock/2:
		p := preset{Phase: 3, Name: "phase 3: 5-node Redlock, fencing tokens, release notices (pub/sub)", URL: redlock5, Options: []string{},
			Also: []string{"fence.Check the token (Lease.Token()) in the storage you write to"}}
		if money && (!hasDB || !in.has("kafka")) {
			p.Also = append(p.Also, "phase 4 adds a database fallback behind a circuit breaker and Kafka lock events: it needs PostgreSQL or MySQL and Kafka in --stores")
		}
		return p
	}
	return preset{Phase: 2, Name: "phase 2: 3-node Redlock, watchdog, no fencing", URL: "redlock://redis1:6379,redis2:6379,redis3:6379?fencing=off", Options: []string{},
		Also: []string{"the watchdog renews each lease every 10 s (TTL 30 s); without fencing a holder paused past its lease can still write: turn fencing on (drop fencing=off) once your storage checks tokens"}}
}

// lockFreePreset is the configuration of the lock-free row: the store
// and calls of the package that replaces the lock, and the lock preset
// for the locks that remain.
func lockFreePreset(in *adviseInput) preset {
	redis, pg := in.has("redis"), in.has("postgres")
	const redisURL, pgURL = "redis://redis1:6379/0", "postgres://turnstile@db:5432/app"
	p := preset{Name: "lock-free", Options: []string{}}
	switch {
	case in.Operation == opStock && redis && in.HotKeyShare > 0:
		p.Name, p.URL = "lock-free: stock.Sharded on Redis", redisURL
		p.Options = []string{`stock.NewSharded(client, "stock:item:42", 8) // client: a rueidis.Client on the URL's server`}
	case in.Operation == opStock && (redis || !pg):
		p.Name, p.URL = "lock-free: stock.Counter on Redis", redisURL
		p.Options = []string{`stock.NewCounter(client, "stock:item:42") // client: a rueidis.Client on the URL's server`}
	case in.Operation == opStock:
		p.Name, p.URL = "lock-free: stock.CAS on PostgreSQL", pgURL
		p.Options = []string{"stock.NewCAS(pool) // pool: a pgxpool.Pool on the URL"}
	case in.Operation == opPayment && (pg || !redis):
		p.Name, p.URL = "idempotency keys on PostgreSQL", pgURL
		p.Options = []string{`idempotency.NewPostgres(pool) // store.Do(ctx, "payment:"+requestID, charge)`}
	case in.Operation == opPayment:
		p.Name, p.URL = "idempotency keys on Redis", redisURL
		p.Options = []string{`idempotency.NewRedis(client) // store.Do(ctx, "payment:"+requestID, charge)`}
	case in.Operation == opJob && (pg || !in.has("mysql")):
		p.Name, p.URL = "job queue: claim.PostgresJobs", pgURL
		p.Options = []string{`claim.NewPostgresJobs(pool, "jobs") // pool: a pgxpool.Pool on the URL`}
	case in.Operation == opJob:
		p.Name, p.URL = "job queue: claim.MySQLJobs", "mysql://turnstile@db:3306/app"
		p.Options = []string{`claim.NewMySQLJobs(db, "jobs") // db: a *sql.DB on the URL`}
	case pg || in.has("mysql") || !redis:
		p.Name, p.URL = "conditional writes in the database", pgURL
		p.Options = []string{"UPDATE … SET used = true WHERE id = ? AND used = false (one row changed: you won)", "claim.NewPostgresCoupons(pool) for once-only items"}
		if !pg && in.has("mysql") {
			p.URL = "mysql://turnstile@db:3306/app"
			p.Options[1] = "claim.NewMySQLCoupons(db) for once-only items"
		}
	default:
		p.Name, p.URL = "atomic steps on Redis", redisURL
		p.Options = []string{`stock.NewCounter(client, key) for counts; idempotency.NewRedis(client) for once-per-request work`}
	}
	if in.Operation != opStock {
		lock := in.lockRow()
		lp := pickPreset(in, lock)
		p.Also = append(p.Also, fmt.Sprintf("for the locks that remain (locks last): %s, %s", lp.Name, lp.URL))
	}
	return p
}

// lockRow is the row of the lock that remains beside a lock-free design:
// a Redlock where Redis runs, else the database or the consensus store.
func (in *adviseInput) lockRow() string {
	switch {
	case in.has("redis"):
		return rowRedlock
	case in.has("postgres") || in.has("mysql"):
		return rowDB
	case in.has("etcd") || in.has("zookeeper"):
		return rowConsensus
	}
	return rowRedlock
}

func dbPreset(in *adviseInput, name string) preset {
	if in.has("postgres") || !in.has("mysql") {
		conns := max(4, int(math.Ceil(in.Rate*in.HoldMicros/1e6/2500)))
		return preset{Name: name + " (PostgreSQL)", URL: "postgres://turnstile@db:5432/locks?lock_conns=" + strconv.Itoa(conns), Options: []string{},
			Also: []string{"keep idle_session_timeout above your largest TTL; the lock table must hold every lock held at once (max_locks_per_transaction × max_connections)"}}
	}
	return preset{Name: name + " (MySQL)", URL: "mysql://turnstile@db:3306/locks?conns=4", Options: []string{},
		Also: []string{"set wait_timeout to about a minute for the lock user, so that a dead connection's lock frees"}}
}

// phase1TTL is the fixed TTL of phase 1: twenty times the average hold,
// rounded up to a second, at least 5 s.
func phase1TTL(hold time.Duration) time.Duration {
	return max(5*time.Second, (20*hold + time.Second - 1).Truncate(time.Second))
}

// goDuration writes d as Go code, e.g. 5*time.Second.
func goDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "*time.Second"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "*time.Millisecond"
}

// size works out the capacity of the store of row for in.
func size(in *adviseInput, row string, p preset, c cost, hotRate, hotLimit float64) capacity {
	k := capacity{Source: c.source, RoundTripMicros: c.roundTrip, Headroom: headroom,
		LocksHeld: in.Rate * in.HoldMicros / 1e6, InFlight: in.Rate * (in.HoldMicros + 2*c.roundTrip) / 1e6,
		HotKeyRate: hotRate, HotKeyLimit: hotLimit, AcquireMicros: c.roundTrip, Groups: 1}
	if in.hold > defaultLeaseTTL/3 {
		k.RenewalsPerSecond = k.LocksHeld / (defaultLeaseTTL / 3).Seconds()
	}
	perNode := func(cpu float64, nodes int) {
		k.ServerCPUMicrosPerAcq = cpu
		k.StoreCores = in.Rate * cpu / 1e6
		k.PerGroupRate = headroom * 1e6 / (cpu / float64(nodes))
		k.Groups = int(math.Ceil(in.Rate / k.PerGroupRate))
		k.Nodes = k.Groups * nodes
	}
	documented := func(store string, rate float64, nodes int) {
		// The table's figure for the store, already a limit to plan
		// within: no headroom on top.
		k.Source, k.Store, k.Headroom = "documented", store, 1
		k.PerGroupRate = rate
		k.Groups = int(math.Ceil(in.Rate / k.PerGroupRate))
		k.Nodes = k.Groups * nodes
	}
	switch {
	case row == rowLockFree && strings.HasPrefix(p.URL, "redis://"):
		// A lock-free step is one command or one short script: a lock
		// and its release cost the server more, so their figure bounds it.
		k.Store = "redis"
		perNode(c.redisCPU, 1)
	case row == rowLockFree:
		k.Source, k.Store = "documented", p.URL[:strings.Index(p.URL, ":")]
		k.Nodes, k.AcquireMicros = 1, c.roundTrip
	case row == rowMutex && p.URL == "mem://":
		k.Source, k.Store, k.Nodes, k.Groups, k.AcquireMicros, k.RoundTripMicros, k.PerGroupRate = "documented", "memory", 0, 0, 1, 0, 0
		k.InFlight = k.LocksHeld
	case strings.HasPrefix(p.URL, "postgres://"):
		documented("postgres", docDBRate, 1)
	case strings.HasPrefix(p.URL, "mysql://"):
		documented("mysql", docDBRate, 1)
	case strings.HasPrefix(p.URL, "etcd://"):
		documented("etcd", docConsensusRate, 3)
		k.AcquireMicros = 2 * c.roundTrip
	case strings.HasPrefix(p.URL, "zookeeper://"):
		documented("zookeeper", docConsensusRate, 3)
		k.AcquireMicros = 2 * c.roundTrip
	case p.Phase == 1:
		k.Store = "redis"
		perNode(c.redisCPU, 1)
	default:
		nodes := c.redlockN
		cpu := c.redlockCPU
		if p.Phase == 2 {
			// Each node of a Redlock does the same work: three nodes cost
			// three fifths of five.
			cpu, nodes = c.redlockCPU/float64(c.redlockN)*3, 3
		}
		k.Store = "redlock-" + strconv.Itoa(nodes)
		perNode(cpu, nodes)
	}
	k.Fits = k.Groups <= 1
	return k
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
func notes(in *adviseInput, row string, k capacity) []string {
	var out []string
	if k.Source == "documented" && k.ServerCPUMicrosPerAcq > 0 {
		out = append(out, fmt.Sprintf("server costs are documented figures (docs/performance.md), the round trip an assumed %.0f µs: measure yours with --backend", docRoundTrip))
	}
	if row == rowLockFree && k.Store == "redis" {
		out = append(out, "the capacity counts each lock-free step at a lock and its release's server cost: an upper bound")
	}
	if row == rowLockFree && k.Store != "redis" {
		out = append(out, fmt.Sprintf("no documented figure for conditional writes in %s: each costs one round trip and one row lock for its own statement", storeTitle(k.Store)))
	}
	if !k.Fits {
		switch {
		case k.Store == "redis":
			out = append(out, fmt.Sprintf("one redis-server runs scripts on one core: %d Redis Cluster masters (redis://h1,h2,h3,...) spread the keys", k.Groups))
		case strings.HasPrefix(k.Store, "redlock"):
			out = append(out, fmt.Sprintf("one Redlock carries ~%s acquisitions/s: %d of them means partitioning the keys between %d redlock:// URLs in your code", fmtRate(k.PerGroupRate), k.Groups, k.Groups))
		case k.Store != "memory":
			out = append(out, fmt.Sprintf("one %s carries ~%s acquisitions/s at %.0f %% headroom, below %s: reduce the locking or move to the next row", storeTitle(k.Store), fmtRate(k.PerGroupRate), headroom*100, fmtRate(in.Rate)))
		}
	}
	if k.HotKeyRate > 0 && row != rowLockFree && k.HotKeyRate > 0.3*k.HotKeyLimit {
		out = append(out, fmt.Sprintf("the hottest key runs at %.0f %% of the most one key allows (%s/s): waiters queue; use release notices (on by default) and consider turnstile.WithQueueWhenBusy", 100*k.HotKeyRate/k.HotKeyLimit, fmtRate(k.HotKeyLimit)))
	}
	if k.RenewalsPerSecond > 0 {
		out = append(out, fmt.Sprintf("holds past 10 s are renewed by the watchdog every 10 s: %s renewal scripts/s on top", fmtRate(k.RenewalsPerSecond)))
	}
	if 2*k.AcquireMicros > 5000 {
		out = append(out, "an acquisition takes more than the 5 ms p99 target here: expect TurnstileAcquireLatencyP99High at its warning level")
	}
	return out
}

// fmtRate writes a rate with thousands separated: 12,500 or 0.5.
func fmtRate(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
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
		fmtRate(a.Input.Rate), a.Input.hold, strconv.FormatFloat(a.Input.HotKeyShare*100, 'g', 3, 64), a.Input.Safety, a.Input.Operation, stores)
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
	fmt.Fprintf(tw, "  url\t%s\n", p.URL)
	for _, o := range p.Options {
		fmt.Fprintf(tw, "  option\t%s\n", o)
	}
	for _, s := range p.Also {
		fmt.Fprintf(tw, "  also\t%s\n", s)
	}
	fmt.Fprintln(tw)
	k := a.Capacity
	fmt.Fprintf(tw, "capacity\t%s, %s figures\n", k.Store, k.Source)
	if k.ServerCPUMicrosPerAcq > 0 {
		fmt.Fprintf(tw, "  server CPU\t%.1f µs per acquisition (lock and release, all nodes): %.2f cores busy\n", k.ServerCPUMicrosPerAcq, k.StoreCores)
	}
	if k.PerGroupRate > 0 {
		fmt.Fprintf(tw, "  servers\t%d (%d × %d), one carrying ~%s acquisitions/s at %.0f %% of its capacity\n", k.Nodes, k.Groups, k.Nodes/max(k.Groups, 1), fmtRate(k.PerGroupRate), k.Headroom*100)
	}
	if k.RoundTripMicros > 0 {
		fmt.Fprintf(tw, "  round trip\t%.0f µs; acquisition ~%.0f µs uncontended\n", k.RoundTripMicros, k.AcquireMicros)
	}
	fmt.Fprintf(tw, "  at once\t%s locks held, %s acquisitions in flight (client concurrency)\n", fmtRate(k.LocksHeld), fmtRate(k.InFlight))
	if k.HotKeyRate > 0 {
		fmt.Fprintf(tw, "  hottest key\t%s acquisitions/s; one key allows at most %s/s\n", fmtRate(k.HotKeyRate), fmtRate(k.HotKeyLimit))
	}
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

package main

import (
	"fmt"
	"strconv"
)

// preset is the configuration to deploy: a Redis deployment phase (1–4;
// 0 when the recommended store is not Redis), its URLs, the Go options
// beside them, and what else the code needs.
type preset struct {
	Phase int    `json:"phase"`
	Name  string `json:"name"`
	// URL is the URL to open; URLs lists one per group when the keys are
	// partitioned between several (URL is the first).
	URL     string   `json:"url"`
	URLs    []string `json:"urls"`
	Options []string `json:"options"`
	Also    []string `json:"also"`
}

// deploy is the configuration of row for the load, and its sizing: the
// two come from one place, so that the URLs hold the servers the
// capacity counts.
func deploy(in *adviseInput, d demand, row string, c cost) (preset, capacity) {
	k := newCapacity(d, c)
	var p preset
	switch row {
	case rowMutex:
		if (in.has("postgres") || in.has("mysql")) && in.Stores != nil {
			p = databaseLock(in, d, c, &k, "a DB transaction, or the database lock")
			break
		}
		k.locks(in, d, false)
		k.Source, k.Store, k.AcquireMicros, k.RoundTripMicros = "documented", "memory", 1, 0
		k.InFlight = k.LocksHeld
		p = preset{Name: "in one process", URL: "mem://", Also: []string{"a DB transaction (SELECT … FOR UPDATE) when several processes do the work"}}
	case rowDB:
		p = databaseLock(in, d, c, &k, "database advisory lock")
	case rowConsensus:
		k.locks(in, d, true)
		k.AcquireMicros = 2 * c.roundTrip
		fence := []string{"fence.Check the token (Lease.Token()) in the storage you write to"}
		if in.has("etcd") {
			k.single("etcd", c.consensus, 3)
			p = preset{Name: "etcd", URL: "etcd://etcd1:2379,etcd2:2379,etcd3:2379", Also: fence}
		} else {
			k.single("zookeeper", c.consensus, 3)
			p = preset{Name: "ZooKeeper", URL: "zookeeper://zk1:2181,zk2:2181,zk3:2181?session_timeout=30s", Also: fence}
		}
	case rowRedis:
		p = phase1(in, d, c, &k)
	case rowRedlock:
		p = redlocks(in, d, c, &k)
	default:
		p = lockFree(in, d, c, &k)
	}
	if p.URLs == nil {
		p.URLs = []string{p.URL}
	}
	p.URL = p.URLs[0]
	if p.Options == nil {
		p.Options = []string{}
	}
	if p.Also == nil {
		p.Also = []string{}
	}
	return p, k
}

// databaseLock is a database's advisory lock, one database sized at the
// table's figure.
func databaseLock(in *adviseInput, d demand, c cost, k *capacity, name string) preset {
	k.locks(in, d, true)
	if in.has("postgres") || !in.has("mysql") {
		k.single("postgres", c.dbRate, 1)
		return preset{Name: name + " (PostgreSQL)", URL: postgresLocks + "?lock_conns=4",
			Also: []string{fmt.Sprintf("keep idle_session_timeout above your largest TTL; the lock table must hold every lock held at once, %s here (max_locks_per_transaction × max_connections)", fmtRate(k.LocksHeld))}}
	}
	k.single("mysql", c.dbRate, 1)
	return preset{Name: name + " (MySQL)", URL: mysqlLocks + "?conns=4",
		Also: []string{"set wait_timeout to about a minute for the lock user, so that a dead connection's lock frees"}}
}

// phase1 is one Redis with a fixed TTL and no watchdog: no renewals.
func phase1(in *adviseInput, d demand, c cost, k *capacity) preset {
	k.locks(in, d, false)
	k.Store = "redis"
	k.spread(c.redisCap(), d.hot, 1, clusterMinMasters, c.redisCPU)
	ttl := phase1TTL(in.hold)
	p := preset{Phase: 1, Name: "phase 1: one Redis, SET NX, fixed TTL", URLs: []string{redisURL(k.Groups)},
		Options: []string{"turnstile.WithTTL(" + goDuration(ttl) + ")", "turnstile.WithoutWatchdog()"},
		Also:    []string{fmt.Sprintf("the lease ends by itself after %v: keep it above your longest hold (not the average), or drop WithoutWatchdog to have it renewed", ttl)}}
	if k.Groups > 1 {
		p.Name = fmt.Sprintf("phase 1 on a Redis Cluster of %d masters, SET NX, fixed TTL", k.Groups)
	}
	return p
}

// redlocks is phase 2, 3 or 4: as many Redlocks as carry the load, the
// keys partitioned between them, and phase 4's database fallback only
// where that database carries the whole load of an outage.
func redlocks(in *adviseInput, d demand, c cost, k *capacity) preset {
	k.locks(in, d, true)
	money := in.Safety == "money"
	db, dbURL := "postgres", postgresLocks
	if !in.has("postgres") {
		db, dbURL = "mysql", mysqlLocks
	}
	hasDB, kafka := in.has("postgres") || in.has("mysql"), in.has("kafka")
	groups, _ := partition(d.requests, d.hotRequests(), c.redlockCap(), 1)
	phase, nodes := 2, 3
	switch {
	case money && hasDB && kafka && groups == 1 && carries(c.dbRate, d.requests):
		phase, nodes = 4, docRedlockNodes
	case money || in.HotKeyShare > 0 || in.Rate > phase3Above:
		phase, nodes = 3, docRedlockNodes
	}
	k.Store = "redlock-" + strconv.Itoa(nodes)
	k.spread(c.redlockCap(), d.hotRequests(), nodes, 1, c.redlockNodeCPU()*float64(nodes))
	fence := "fence.Check the token (Lease.Token()) in the storage you write to"
	kafkaOption := `turnstile.WithObserver(kafka) // kafka, _ := events.NewKafka([]string{"kafka1:9092"})`
	var p preset
	switch phase {
	case 4:
		k.failTo(db, c.dbRate)
		p = preset{Phase: 4, Name: "phase 4: phase 3 + Kafka events + circuit breaker + database fallback",
			URLs:    []string{fallbackURL(redlockURL(0, nodes, ""), dbURL)},
			Options: []string{kafkaOption},
			Also: []string{
				fmt.Sprintf("the breaker sends new locks to the database after 5 failed calls (trip_after) and back when Redis recovers; each switch waits out a grace (31 s, at least the TTL) so a key never has two holders; in an outage the database takes all %s lock requests/s, within its ~%s/s",
					fmtRate(d.requests), fmtRate(c.dbRate)),
				"lock events go to the Kafka topic lock-events, never blocking a lock; watch turnstile_events_dropped_total",
				fence,
			}}
	case 3:
		p = preset{Phase: 3, Name: "phase 3: 5-node Redlock, fencing tokens, release notices (pub/sub)", Also: []string{fence}}
		switch {
		case money && hasDB && kafka:
			p.Name += ", lock events to Kafka"
			p.Options = []string{kafkaOption}
			p.Also = append(p.Also, fmt.Sprintf("no database fallback (phase 4): a Redis outage would move all %s lock requests/s onto the database, which carries ~%s/s", fmtRate(d.requests), fmtRate(c.dbRate)))
		case money:
			p.Also = append(p.Also, "phase 4 adds a database fallback behind a circuit breaker and Kafka lock events: it needs PostgreSQL or MySQL and Kafka in --stores")
		}
	default:
		p = preset{Phase: 2, Name: "phase 2: 3-node Redlock, watchdog, no fencing",
			Also: []string{fmt.Sprintf("the watchdog renews each lease every %v (TTL %v); without fencing a holder paused past its lease can still write: turn fencing on (drop fencing=off) once your storage checks tokens", renewEvery, renewEvery*3)}}
	}
	if phase < 4 {
		query := ""
		if phase == 2 {
			query = "?fencing=off"
		}
		for g := range k.Groups {
			p.URLs = append(p.URLs, redlockURL(g, nodes, query))
		}
	}
	if k.Groups > 1 {
		p.Name = fmt.Sprintf("%s; %d Redlocks, the keys partitioned between them", p.Name, k.Groups)
		p.Options = append(p.Options, fmt.Sprintf("clients[crc32.ChecksumIEEE([]byte(key))%%%d].Acquire(ctx, key) // clients[i] opened on the i-th URL", k.Groups))
		p.Also = append(p.Also, fmt.Sprintf("every process opens the %d URLs in this order and picks a key's Redlock by the same hash; changing the count moves keys to other Redlocks: stop every holder first", k.Groups))
	}
	return p
}

package main

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The placeholder servers of the presets' URLs, to be replaced by yours.
const (
	postgresLocks = "postgres://turnstile@db:5432/locks"
	mysqlLocks    = "mysql://turnstile@db:3306/locks"
	postgresApp   = "postgres://turnstile@db:5432/app"
	mysqlApp      = "mysql://turnstile@db:3306/app"
)

// redisURL is one Redis, or a Redis Cluster of masters masters, named by
// the first clusterMinMasters of them: the client learns the rest from
// whichever answers.
func redisURL(masters int) string {
	if masters <= 1 {
		return "redis://redis1:6379/0"
	}
	hosts := make([]string, min(masters, clusterMinMasters))
	for i := range hosts {
		hosts[i] = "redis" + strconv.Itoa(i+1) + ":6379"
	}
	return "redis://" + strings.Join(hosts, ",")
}

// redlockURL is the group-th Redlock (from 0) of nodes servers, each
// Redlock on servers of its own.
func redlockURL(group, nodes int, query string) string {
	hosts := make([]string, nodes)
	for i := range hosts {
		hosts[i] = "redis" + strconv.Itoa(group*nodes+i+1) + ":6379"
	}
	return "redlock://" + strings.Join(hosts, ",") + query
}

func fallbackURL(primary, secondary string) string {
	return "fallback://?primary=" + primary + "&secondary=" + url.QueryEscape(secondary)
}

// lockFree is the configuration of the lock-free row: the store and
// calls of the package that replaces the lock, sized on Redis at one
// short script per step, on a database at the table's figure for one;
// and the lock for the locks that remain.
func lockFree(in *adviseInput, d demand, c cost, k *capacity) preset {
	redis, pg, mysql := in.has("redis"), in.has("postgres"), in.has("mysql")
	p := preset{Name: "lock-free"}
	onRedis, steps := false, 1.0
	switch {
	case in.Operation == opStock && redis && in.HotKeyShare > 0:
		p.Name, onRedis = "lock-free: stock.Sharded on Redis", true
		p.Options = []string{`stock.NewSharded(client, "stock:item:42", 8) // client: a rueidis.Client on the URL's server`}
	case in.Operation == opStock && (redis || !pg):
		p.Name, onRedis = "lock-free: stock.Counter on Redis", true
		p.Options = []string{`stock.NewCounter(client, "stock:item:42") // client: a rueidis.Client on the URL's server`}
	case in.Operation == opStock:
		p.Name, p.URL = "lock-free: stock.CAS on PostgreSQL", postgresApp
		p.Options = []string{"stock.NewCAS(pool) // pool: a pgxpool.Pool on the URL"}
	case in.Operation == opPayment && (redis || !pg):
		p.Name, onRedis, steps = "idempotency keys on Redis", true, idempotencySteps
		p.Options = []string{`idempotency.NewRedis(client) // store.Do(ctx, "payment:"+requestID, charge)`}
	case in.Operation == opPayment:
		p.Name, p.URL = "idempotency keys on PostgreSQL", postgresApp
		p.Options = []string{`idempotency.NewPostgres(pool) // store.Do(ctx, "payment:"+requestID, charge)`}
	case in.Operation == opJob && (pg || !mysql):
		p.Name, p.URL = "job queue: claim.PostgresJobs", postgresApp
		p.Options = []string{`claim.NewPostgresJobs(pool, "jobs") // pool: a pgxpool.Pool on the URL`}
	case in.Operation == opJob:
		p.Name, p.URL = "job queue: claim.MySQLJobs", mysqlApp
		p.Options = []string{`claim.NewMySQLJobs(db, "jobs") // db: a *sql.DB on the URL`}
	case redis || (!pg && !mysql):
		p.Name, onRedis = "atomic steps on Redis", true
		p.Options = []string{`stock.NewCounter(client, key) for counts; idempotency.NewRedis(client) for once-per-request work; claim.NewRedisCoupons(client, "coupon:") for once-only items`}
	default:
		p.Name, p.URL = "conditional writes in the database", postgresApp
		p.Options = []string{"UPDATE … SET used = true WHERE id = ? AND used = false (one row changed: you won)", "claim.NewPostgresCoupons(pool) for once-only items"}
		if !pg {
			p.URL = mysqlApp
			p.Options[1] = "claim.NewMySQLCoupons(db) for once-only items"
		}
	}

	// No lock is held: what runs at once are the steps, one round trip
	// each. An idempotency claim is renewed as a lease is.
	k.RequestsPerSecond, k.InFlight = d.rate, d.rate*c.roundTrip/1e6
	hot := d.hot
	if in.Operation == opPayment {
		k.RequestsPerSecond, k.RenewalsPerSecond, hot = d.requests, d.renewals(), d.hotRequests()
	}
	if onRedis {
		k.Store = "redis"
		k.spread(headroom*1e6/(c.scriptCPU*steps), hot, 1, clusterMinMasters, c.scriptCPU*steps)
		p.URL = redisURL(k.Groups)
		if k.Groups > 1 {
			p.Name += fmt.Sprintf(", a Redis Cluster of %d masters", k.Groups)
		}
	} else {
		k.single(p.URL[:strings.Index(p.URL, ":")], c.dbRate, 1)
	}
	if in.Operation != opStock {
		p.Also = append(p.Also, "for the locks that remain (locks last), sized by their own rate with turnstile advise: "+remainingLock(in))
	}
	return p
}

// remainingLock is the lock beside a lock-free design: a Redlock where
// Redis runs, else the database or the consensus store.
func remainingLock(in *adviseInput) string {
	switch {
	case in.has("redis"):
		return "phase 3: 5-node Redlock, fencing tokens, release notices (pub/sub), " + redlockURL(0, docRedlockNodes, "")
	case in.has("postgres"):
		return "database advisory lock (PostgreSQL), " + postgresLocks
	case in.has("mysql"):
		return "database advisory lock (MySQL), " + mysqlLocks
	case in.has("etcd"):
		return "etcd, etcd://etcd1:2379,etcd2:2379,etcd3:2379"
	case in.has("zookeeper"):
		return "ZooKeeper, zookeeper://zk1:2181,zk2:2181,zk3:2181?session_timeout=30s"
	}
	return "phase 3: 5-node Redlock, fencing tokens, release notices (pub/sub), " + redlockURL(0, docRedlockNodes, "")
}

// phase1TTL is the fixed TTL of phase 1: phase1TTLHolds times the
// average hold, rounded up to a second, at least phase1MinTTL.
func phase1TTL(hold time.Duration) time.Duration {
	return max(phase1MinTTL, (phase1TTLHolds*hold + time.Second - 1).Truncate(time.Second))
}

// goDuration writes d as Go code, e.g. 5*time.Second.
func goDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "*time.Second"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "*time.Millisecond"
}

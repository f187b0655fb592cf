// Command bench compares turnstile with the Go Redis lock libraries its
// users would otherwise choose — go-redsync/redsync, bsm/redislock and
// rueidis's rueidislock — on the same machine, in the same run, against
// the same redis-server processes, which it starts itself on loopback
// (one, and five for the Redlock rows). Run it from this directory:
//
//	go run .                      # the whole comparison, about 6 minutes
//	go run . --quick              # every workload, short cells, under 2 minutes
//	go run . --only 'herd' --duration 5s
//	go run . --peers=false        # turnstile alone
//
// (or `go run ./bench` from the repository root).
//
// Every library runs as its users run it, with lock TTL 8 s where it
// takes one: turnstile opened by URL at its defaults, its default
// backoff (10 ms … 1 s) without a retry limit ("turnstile"), and the
// same with a 1 … 8 ms backoff ("turnstile-shared-backoff", a variant,
// no peer), and over a go-redis v9 client instead of rueidis on one
// server ("turnstile-goredis", a variant); redsync with its default retry delay and unlimited tries;
// redislock retrying every millisecond; rueidislock at its defaults, and
// with KeyMajority 1 ("rueidislock-km1"). See package peers.
//
// The workloads (workload.SideBySide) are: distinct keys with 1, 16, 64
// and 256 workers; a Redlock of 5 servers with 1 and 64 workers
// (turnstile and redsync); 64 workers on 8 hot keys, and on one; one hot
// key with the 64 workers spread over 8 clients; a herd of --herd (500)
// waiters on one key, each holding it --hold (1 ms), in one client,
// spread over 10 clients, and spread over 10 processes. Every workload
// runs through every library that supports it, each cell for
// --duration (3 s), the libraries in alternating order from one
// workload to the next. Each cell reports acquisitions per second,
// acquire latency percentiles from an HDR histogram, fairness between
// workers (Jain's index), the servers' commands per acquisition (INFO
// commandstats) and, for the herd, the handoff gap. The run also
// measures Redis's own capacity with redis-benchmark and, unless --quick
// or --scale=false, holds 1,000,000 leases under one turnstile client's
// watchdog.
//
// Results go to standard output as a table, and to --out (default
// bench/report of the checkout) as results.jsonl, table.txt and
// report.html, a self-contained page with charts.
//
// With --store etcd it compares turnstile on etcd (etcd://, at its
// defaults) with etcd's own recipe, concurrency.Mutex with one
// concurrency.Session per worker, on a single-member etcd it starts on
// loopback with its data directory on disk (fsync on): distinct keys
// with 1, 16 and 64 workers and one hot key with 64
// (workload.NativeRecipe). Each cell also reports, from etcd's /metrics,
// the gRPC messages the member received per acquisition by method, the
// entries committed to its log and its WAL fsyncs:
//
//	go run . --store etcd --duration 5s
//
// --store postgres, mysql and zookeeper run the same workloads on one
// PostgreSQL, MariaDB or ZooKeeper server started as the test suite
// starts it, turnstile on the store beside the store's own recipe:
// pg_advisory_lock on a pgxpool pool of one connection per worker,
// GET_LOCK on a database/sql pool of one connection per worker, and
// go-zookeeper's zk.NewLock with one zk.Conn per worker. Their cells
// report the server's CPU time per acquisition (its processes' times
// from /proc):
//
//	go run . --store postgres --duration 5s
//
// The package's tests also hold BenchmarkBackends, which compares
// turnstile's own backends (memory, Redis, Redlock, etcd, ZooKeeper,
// PostgreSQL, MySQL) with one another:
//
//	go test -run '^$' -bench Backends -benchtime 2s
//
// It is a module of its own so that the peer libraries and every backend
// never enter turnstile's go.mod.
package main

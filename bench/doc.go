// Command bench compares turnstile with the Go Redis lock libraries its
// users would otherwise choose — go-redsync/redsync, bsm/redislock and
// rueidis's rueidislock — on the same machine, in the same run, against
// the same redis-server processes, which it starts itself on loopback
// (one, and five for the Redlock rows). Run it from this directory:
//
//	go run .                      # the whole comparison, under 15 minutes
//	go run . --quick              # every workload, short cells, under 2 minutes
//	go run . --only 'herd' --duration 5s
//	go run . --peers=false        # turnstile alone
//
// (or `go run ./bench` from the repository root). Every workload (see
// workload.Suite) runs through every library that supports it, each cell
// for --duration, the libraries in alternating order from one workload
// to the next. Each cell reports acquisitions per second, acquire
// latency percentiles from an HDR histogram, fairness between workers
// and the servers' commands per acquisition (INFO commandstats). The run
// also measures Redis's own capacity with redis-benchmark and, unless
// --quick or --scale=false, holds 1,000,000 leases under one turnstile
// client's watchdog.
//
// Results go to standard output as a table, and to --out (default
// bench/report of the checkout) as results.jsonl, table.txt and
// report.html, a self-contained page with charts.
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

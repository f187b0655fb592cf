// Package bench compares turnstile's lock backends against one another:
// the in-process store, Redis (single node), Redlock (3 and 5 nodes),
// etcd, ZooKeeper, PostgreSQL and MySQL, each a real server started on a
// free loopback port for the run. See BenchmarkBackends for the command.
//
// It is a module of its own so that what only the benchmark needs — every
// backend and, through them, every server client library — never enters
// turnstile's go.mod: an application that imports turnstile pulls in
// nothing for it. The package holds benchmarks only; it has no API.
package bench

// Package redlock is a turnstile backend made of N independent lock
// stores — usually N Redis servers, each its own primary, not replicas of
// one another: a lock is held when a majority of them hold it (Redlock).
// Losing or corrupting a lock then takes a majority of
// failures, where a single server loses it in one restart or one failover.
//
//	nodes := []driver.Backend{r1, r2, r3, r4, r5}  // redis.Backend values
//	b, err := redlock.New(nodes)
//	c, err := turnstile.New(b)
//
//	c, err := turnstile.Open(ctx, "redlock://h1:6379,h2:6379,h3:6379,h4:6379,h5:6379")
//
// Because a Backend is itself a driver.Backend, the Client's watchdog,
// waiting and every other feature work on it unchanged.
//
// # One call
//
// Every call goes to every node at once, each with a node timeout
// (WithNodeTimeout, default 50 ms, at most a tenth of the lease TTL), so a
// call costs the latency of the quorum's slowest node, never the sum.
// Acquire and Extend return as soon as their outcome is decided — a quorum
// said yes, or too few nodes are left to say it and it is known whether
// refusals or failures ruled it out (see Acquire) — and the answers still
// on their way are collected in the background (WithWaitAll waits for
// them). Release waits for every node up to the node timeout, so that the
// next owner finds every answering node free.
//
// Acquire succeeds when a quorum (N/2+1) granted the lock, the fencing
// token was written back to a quorum, and the lease still has validity
// left: TTL − elapsed − (TTL × 1 % + 2 ms) > 0, elapsed measured from
// before the first request. Otherwise the lock is released on every node
// that may hold it: at once where it was granted or the call failed, and
// on a node still working on it as soon as it answers, so a grant that
// lands late is removed after it landed. Release and Extend go to every
// node too, including those that did not grant the lock; Extend succeeds
// only on a quorum and with validity left. "Not acquired" (or "not
// held") means more than N − quorum nodes refused and a quorum answered;
// a call that failed nodes kept from a quorum fails with a *QuorumError,
// which matches redlock.ErrNoQuorum and names every failed node.
//
// # Fencing tokens
//
// Each node issues its own tokens for a key. Two quorums share a node,
// not their maxima, so the largest token of one quorum can exceed that of
// the next. Acquire therefore takes the largest token T of its quorum and
// raises the fence of the key to T on the granting nodes, conditional on
// the lock still being held there (driver.Fencer), before it returns the
// lease; a later holder's quorum meets one of those nodes, which issues a
// token above T. docs/guarantees.md proves it. The write-back costs one
// more round trip; WithoutFencing skips it when tokens are not used.
//
// # Restarted nodes
//
// A node that restarts without its data forgets the locks it granted, and
// could grant them again while their holders still count on it. Dial and
// turnstile.Open therefore create nodes with a restart quarantine
// (WithRestartQuarantine, default 35 s, the default TTL plus a margin):
// a node refuses every lock until the quarantine has passed since its
// process started, which outlasts every lease it granted before, provided
// the quarantine is at least the largest TTL of its clients. The Backend
// refuses TTLs above the shortest quarantine of its nodes. A fresh
// deployment waits out the quarantine once, as every node just started.
//
// # What it does not guarantee
//
// Redlock assumes that clocks advance at about the same rate everywhere
// (within the 1 % drift allowance) and that servers keep what they
// acknowledged, except for restarts, which the quarantine covers. It does
// not cover: a server that restores an older snapshot (RDB, or an AOF
// that was not fsynced) — use appendfsync always, or run the lock servers
// without persistence so that every restart is quarantined; a failover to
// a replica that missed recent writes — do not give lock servers replicas
// that can be promoted; a server clock that jumps, which expires locks
// early; and, as with every lock, a holder paused past its lease. Only
// storage that checks the fencing token protects against all of these.
//
// TLS and ACLs. tls=on, or any of the TLS parameters every turnstile URL
// takes (ca_file, cert_file, key_file, server_name), connects to every
// node with TLS and its certificate verified (under server_name, or the
// node's own host); the user and password log in on every node. A node
// that refuses the user a command fails its vote with
// turnstile.ErrPermission. docs/security/redis-acl.md has the nodes'
// recipe (the locking commands and INFO).
package redlock

// Package fallback is a turnstile backend made of two stores: a primary
// (Redis or Redlock) that serves every call while it is healthy, and a
// secondary (a database backend such as PostgreSQL) that serves new
// acquisitions while a circuit breaker (github.com/sony/gobreaker/v2)
// holds the primary to be down.
//
//	b, err := fallback.New(redisBackend, postgresBackend,
//		fallback.WithGrace(31*time.Second), fallback.WithLogger(logger))
//	client, err := turnstile.New(b)
//
// # Breaker
//
// Every call to the primary passes through the breaker. Store errors count
// as failures; "not acquired" and "not held" answers are successes, and an
// error that comes with the caller's own context ending counts as neither.
// After WithTripAfter consecutive failures (default 5) the breaker opens
// and acquisitions go to the secondary. After WithOpenTimeout (default
// 5 s) it is half-open: one acquisition at a time also probes the primary
// (it takes and at once releases the caller's key there, and gives the
// result up); when a probe succeeds the breaker closes and acquisitions go
// back to the primary. State returns the breaker's state; WithLogger logs
// and WithOnStateChange reports every change.
//
// # Switching never yields two holders
//
// A switch is a change of the store that serves acquisitions (breaker
// closed: primary; open or half-open: secondary). At every switch:
//
//   - the store switched to grants nothing for the grace (WithGrace,
//     default 31 s): Acquire answers "not acquired", so a Client waits and
//     retries. Grace is at least the largest TTL in use plus drift
//     (Acquire and Extend refuse longer TTLs), so every lock the store
//     being left granted or renewed before the switch has expired by then;
//   - leases granted before the switch can no longer be renewed: Extend
//     answers "not held", so their holders see the lease lost (at the
//     latest when its validity ends, which is before the grace ends);
//   - a grant or renewal that was in flight when the switch happened is
//     given up (a grant is released again and reported "not acquired").
//
// Extend and Release go to the store that granted the lease, remembered in
// memory per key and owner; Release of a lease this Backend does not know
// goes to both stores.
//
// Limits. The rule is per process: each Backend switches when its own
// breaker does. It keeps two holders apart across processes when every
// process sees the same health of the primary — the primary is down (or
// back) for all of them — and their breakers switch within (grace − TTL)
// of each other. When the primary is unreachable from some processes but
// not others (a partial partition), one process may hold a key in the
// primary while another is granted it in the secondary. A process whose
// breaker stays open keeps using the secondary while others have returned
// to the primary, for at most the open timeout after the primary recovers
// if it keeps acquiring; choose grace ≥ largest TTL + open timeout + drift
// to cover that. Redis itself loses locks on failover or restart without
// persistence; see the redis package.
//
// # Fencing tokens
//
// Tokens are the granting store's own. The Redis, PostgreSQL and MySQL
// backends all issue max(last + 1, server time in µs) per key, and a
// switch waits out the grace before the new store grants anything, so a
// token issued after a switch is larger than every token issued before it
// as long as the two servers' clocks differ by less than the grace. The
// memory, etcd and ZooKeeper backends count differently (a counter,
// revisions, zxids): do not pair them with a time-based store if storage
// checks tokens across a switch.
package fallback

// Package fallback is a turnstile backend made of two stores: a primary
// (Redis or Redlock) that serves every call while it is healthy, and a
// secondary (a database backend such as PostgreSQL) that serves new
// acquisitions while the primary is down. Which store serves is the
// pair's state, kept in the secondary so that every process of the pair,
// a fresh one too, uses the same store; each process's circuit breaker
// (github.com/sony/gobreaker/v2) decides when it moves the pair.
//
//	b, err := fallback.New(redisBackend, postgresBackend,
//		fallback.WithGrace(31*time.Second), fallback.WithLogger(logger))
//	client, err := turnstile.New(b)
//
// # Breaker
//
// Every call to the primary passes through this process's breaker. Store
// errors count as failures; "not acquired" and "not held" answers are
// successes, and an error that comes with the caller's own context
// ending counts as neither. After WithTripAfter consecutive failures
// (default 5) the breaker opens, and so it does at the first failure to
// reach a primary this process has never reached (the primary of a
// fallback:// URL that refused the connection when the pair was opened):
// the process then moves the pair to the secondary, and the call whose
// failure opened the breaker answers "not acquired". While the secondary
// serves, an acquisition also probes the primary, at most once per
// WithOpenTimeout (default 5 s) in each process and not while its breaker
// is open (a process's first acquisition probes at once): it takes and at
// once releases the caller's key there, and gives the result up; a probe
// that succeeds moves the pair back. State returns the breaker's state,
// Serving the store that serves; WithLogger logs the breaker's changes
// and the pair's, and WithOnStateChange reports the breaker's.
//
// # The pair's state
//
// The secondary keeps the pair's state as switch locks, on keys
// "turnstile:fallback/1", "turnstile:fallback/2", ... (or
// "turnstile:fallback:NAME/..." for a pair named with WithPair): a process
// moves the pair by taking the lock numbered one above the last one it
// read, with the secondary's own Acquire, for 72 hours, never renewed nor
// released. Only one process can take it, so two processes never move
// the pair two ways at once; the loser reads what the winner did. Switch
// locks expire in the order they were taken, and the last one held says
// where the pair stands: a failover (the secondary serves once its grace
// has run; in the last grace of its 72 hours it serves no more), a
// failback (the primary serves once its grace has run), or, with none
// held, the primary serves. A process reads them with the secondary's
// List (driver.Inspector), one round trip, which also says how long each
// has left by the secondary's clock: the same clock for every process.
//
// A process reads the state before a grant or renewal when its last read
// started longer ago than the trust time, grace − TTL − (2 % of the grace
// + 2 ms): 0.378 s for the default TTL and grace. A read must start and
// end within the trust time for the grant or renewal to go ahead;
// otherwise the acquisition answers "not acquired" and the renewal an
// error (the Client's watchdog tries again). Acquire and Extend refuse
// TTLs above MaxTTL(grace), which leaves at least a tenth of the grace,
// at most 100 ms, of trust time.
//
// # Switching never yields two holders
//
// A switch is a change of the store that serves. At every switch, in
// either direction:
//
//   - the store switched to grants nothing, in any process, for the grace
//     (WithGrace, default 31 s), measured by the secondary's clock from
//     the switch lock's grant;
//   - every process stops granting and renewing in the store being left
//     within the trust time of the switch, since it reads the state at
//     least that often while it grants; so every lease of that store,
//     valid for at most a TTL from its last grant or renewal, has ended
//     before the grace has (trust time + TTL + drift = grace);
//   - leases granted before the switch can no longer be renewed: Extend
//     answers "not held", and their holders see the lease lost;
//   - a grant or renewal that was in flight when this process learnt of
//     the switch is given up (a grant is released again and reported "not
//     acquired").
//
// This holds across processes whatever each of them sees of the primary
// — a process that still reaches the primary after the others have moved
// the pair stops using it within the trust time — as long as each can
// read the secondary and all use the same grace; docs/guarantees.md has
// the argument. Extend and Release go to the store that granted the
// lease, remembered in memory per key and owner; Release of a lease this
// Backend does not know goes to both stores.
//
// # Processes that start during an outage
//
// A fresh process learns where the pair stands from the secondary before
// its first lock, like any other. Opened from a fallback:// URL, the pair
// opens with either store down: a store that refuses the connection is
// connected by a later call (at most once a second), and Open waits at
// most one second for a store that does not answer once the other has
// connected. So a process started while the secondary serves takes its
// first lock there within about 2 s on top of the secondary's own
// connection and round trips: up to 1 s for Open, up to 1 s for its
// first acquisition's probe of the primary (one that refuses the
// connection costs neither). The first process to find the primary down
// moves the pair itself and is granted a lock once the grace has run.
//
// # Limits
//
// A process that cannot read the secondary keeps to the store it last
// knew (and ends a grace it knew of) for the open timeout at a time, but
// does not move the pair: if others move it meanwhile (they reach the
// secondary but not the primary, while it reaches the primary but not the
// secondary), it can hold a key in the primary while another is granted
// it in the secondary. A process that cannot reach the primary while the
// others can still moves the whole pair: safe, but each switch costs a
// grace, and such a process makes the pair switch back and forth. Every
// process of a pair must use the same grace (a fallback:// URL without
// grace derives it from the TTL: give grace when processes use several
// TTLs), and nobody may remove the switch locks by hand. A secondary that
// is no driver.Inspector, or does not say how long its locks last, cannot
// keep the state: each process then moves only itself, on its own
// breaker, and keeps two holders apart across processes only while they
// all see the same health of the primary and switch within (grace − TTL)
// of each other. Redis itself loses locks on failover or restart without
// persistence; see the redis package. Reading the state costs one List
// of the secondary per trust time in a busy process: a range read of the
// pair's keys on PostgreSQL and MySQL, a SCAN of the whole keyspace on
// Redis.
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

// Package demo is "turnstile demo": a suite of incidents from the field,
// each run as the naive code that caused it and as the code using
// turnstile, on real servers, ending in a verdict per run.
//
// Its one entry point is [Main], which the turnstile command calls for
// "turnstile demo". The scenarios, one file each, in the order the demo
// runs them:
//
//   - flash-sale (flashsale.go, flashsale_shop.go): 3,847 concurrent
//     orders from several processes for 1,000 units; naive read-check-write
//     against a lock, an atomic decrement, sharded stock and a
//     compare-and-set row.
//   - double-payment (payment.go): a client times out and retries a
//     payment; an idempotency key under a lock charges once.
//   - rider (rider.go): two dispatchers assign riders to the same orders.
//   - gc-pause (gcpause.go): a holder stopped past its TTL writes with its
//     old token; a fence rejects it.
//   - long-job (longjob.go): jobs longer than a fixed TTL write the same
//     file; the watchdog keeps the lease.
//   - owner-id (ownerid.go): five processes share the owner id
//     "Thread-42", and release each other's locks; turnstile's owner ids
//     are their own.
//   - herd (herd.go): thousands of waiters on one key, four ways of
//     waiting compared by store commands per acquisition.
//   - coupon (coupon.go): shoppers race for single-use coupon codes;
//     naive read-then-write issues codes twice, claim's one-statement
//     redemption (PostgreSQL) and script (Redis) issue each once.
//   - jobs (jobs.go): workers take jobs from one table; naive
//     select-then-update runs jobs twice, claim's FOR UPDATE SKIP LOCKED
//     queue runs each once, and a crashed worker's jobs come back after
//     its lease while its late Completes are refused. It needs
//     PostgreSQL, and says it skipped itself without.
//   - redlock-outage (redlockoutage.go): 3 of a Redlock's 5 Redis nodes
//     die under four service instances, each with a fallback pair over
//     the Redlock and PostgreSQL; acquisitions fail fast, the breakers
//     open, PostgreSQL grants after the grace, and the pair goes back to
//     the Redlock once the nodes restart. Phase by phase it reports the
//     acquisitions, failures, granting store and latency, and checks that
//     fencing tokens only increase and no two holders overlap.
//
// The servers they run on (env.go) are given with --redis and --postgres,
// started for the run (redis-server, PostgreSQL) or in-process
// (miniredis); the verdicts are printed as a table or JSON lines
// (result.go).
//
// # Worker processes
//
// Scenarios that need separate service instances run them as worker
// processes (worker.go): the demo re-executes its own binary as
//
//	turnstile demo __worker JOB
//
// where JOB is a JSON object naming the scenario, the variant, the
// worker's index and the scenario's parameters. "__worker" is hidden: no
// usage text lists it. The servers' URLs go to the worker in the
// environment variables TURNSTILE_DEMO_REDIS and TURNSTILE_DEMO_POSTGRES,
// never on its command line, which every local user can read. A worker
// talks to the demo over its standard streams, one line per message: on
// stdout "ready" when set up, then any number of "progress N" and
// "event JSON", and last "result JSON" or "error TEXT"; on stdin it reads
// "go", the demo's signal to start its work. A worker dies with the demo
// process, and the demo kills its workers when a run ends or is
// interrupted.
package demo

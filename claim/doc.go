// Package claim hands out things that must each be taken exactly once —
// a limited-issue coupon, a job from a queue — without a lock: the
// lock-free choices that turnstile's load table (docs/backends.md) gives
// from 100,000 requests a second. Each is one atomic step on the store
// that holds the thing, where a lock would serialise a whole critical
// section, round trips included.
//
//	PostgresCoupons  UPDATE ... WHERE code = $1 AND NOT used, PostgreSQL
//	MySQLCoupons     the same UPDATE, MySQL or MariaDB
//	RedisCoupons     one short script per redemption, Redis
//	PostgresJobs     SELECT ... FOR UPDATE SKIP LOCKED, PostgreSQL
//	MySQLJobs        the same, MySQL 8.0+ or MariaDB 10.6+
//
// # Coupons
//
// A coupon is redeemed by whoever comes first: Redeem behaves as
//
//	UPDATE coupons SET used = true, used_by = $2, used_at = now()
//	 WHERE code = $1 AND used = false
//
// Of any number of concurrent redeemers of a code exactly one gets a
// Redemption; the others get a *UsedError (ErrUsed) naming who has it. A
// redeemer that asks again for a coupon it holds gets its Redemption
// again, marked Again, so a redemption whose reply was lost (a timeout)
// is simply retried. A code that was never issued is ErrUnknownCode.
// Issue creates coupons in batches and keeps those that already exist.
//
// # Jobs
//
// Workers Claim up to n due jobs each; a claim holds its jobs for a lease,
// which Heartbeat extends, until the worker calls Complete or Release.
// Concurrent claims skip each other's rows instead of waiting on them, so
// every job goes to one worker at a time. A worker that crashes (or
// stalls) stops heartbeating: once its lease passes, the next Claim of any
// worker takes its jobs again, with the attempt counter one higher — no
// reaper runs. The attempt is the claim's fencing token: Complete and
// Release with an older attempt are refused with a *LostError
// (ErrClaimLost), so a worker that wakes up after losing its job cannot
// mark it done over the worker that now holds it. Completion is exactly
// once; the work itself may have run twice (the stalled worker's and the
// next), as under any lease: make its effects idempotent, or pass the
// attempt to where they are written as a fencing token.
//
// Leases and redemption times are read by the database's (or Redis's)
// clock, so workers' clocks do not matter.
//
// # Which one
//
// A coupon UPDATE or a SKIP LOCKED claim beats a lock whenever the thing
// taken is a row: the database already serialises writers of one row, so
// a lock in front of it only adds round trips and a second system that
// can fail. Take a lock when taking the thing also means calling
// something outside the database that must run once (a payment): redeem
// here, charge under an idempotency key, and give the coupon back if the
// charge fails.
//
// # Errors
//
// ErrUsed, ErrUnknownCode, ErrClaimLost and ErrUnknownJob are outcomes.
// Bad input is an error before any round trip: an empty or over-long
// code, redeemer, queue or worker matches turnstile.ErrInvalidKey; a claim
// of n outside [1, MaxClaim], a negative delay, a job that no Claim
// returned, or an empty batch matches ErrInvalidArgument; a nil client or
// a bad option matches turnstile.ErrInvalidOption. Any other error (a
// timeout, a lost connection) leaves it unknown whether the call took
// effect: retry a Redeem with the same redeemer, or a Complete or Release
// with the same Job — each succeeds if the lost call did.
package claim

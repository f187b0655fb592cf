// Package stock sells a limited stock without a lock: the lock-free choice
// that turnstile's load table (docs/backends.md) gives from 100,000 lock
// requests a second. Each strategy hands out never more units than there
// are, however many orders arrive at once; the orders it cannot serve get
// ErrSoldOut.
//
//	Counter  one Redis key, DECRBY with give-back
//	Sharded  N Redis keys in one hash slot, one short script
//	CAS      one PostgreSQL row, optimistic compare-and-set
//
// # Which one
//
// At 100,000 orders a second and more, go lock-free first and take a lock
// last: a lock serialises the whole critical section, round trips included,
// while these serialise one atomic step on the server that holds the stock.
//
//   - Counter is the fastest and simplest: one round trip per order (two
//     when sold out). Its raw key can read below zero for an instant; no
//     order ever gets a unit that is not there.
//   - Sharded never lets a key read below zero and never refuses an order
//     the total could serve, at the cost of one short script per order. Its
//     shards share one hash slot, so on a Redis Cluster they live on one
//     node: sharding one item spreads it over keys (each order learns its
//     shard, for per-shard accounting or locks), not over nodes, and on
//     one server it is no faster than Counter. Items with different keys
//     do land on different nodes.
//   - CAS keeps the stock in PostgreSQL, next to the orders, where a
//     CHECK (quantity >= 0) guards it. Every order costs two round trips and
//     orders on one hot row conflict: it suits about a thousand orders a
//     second on one item. ErrConflict means retry the order.
//
// None of them replaces a lock when selling a unit also calls an external
// system that must run once (a payment): take the unit here, then charge
// under an idempotency key, and Put the unit back if the charge fails.
//
// # Errors
//
// ErrSoldOut and ErrConflict are the outcomes of an order. Bad input is an
// error before any round trip: a quantity that is not positive (or, for
// Set, negative) or above MaxQuantity matches ErrInvalidQuantity, an empty
// or over-long key matches turnstile.ErrInvalidKey, and a nil client or
// pool, a shard count or index out of range, or a bad option matches
// turnstile.ErrInvalidOption. Any other error (a timeout, a lost
// connection) leaves it unknown whether the order took its units: resolve
// it as for any write whose reply was lost, for example by reading Left
// after the fact.
package stock

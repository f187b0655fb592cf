// Package fence makes storage refuse writes that carry stale fencing
// tokens, the one defence against a lock holder that was paused past its
// lease — a GC pause, a VM stall — and wakes up believing it still holds
// the lock.
//
// Every turnstile lease carries a token, strictly greater than the tokens
// of every earlier lease of the same key. A guard remembers, per resource,
// the last token a write carried, and refuses a write whose token is not
// greater (AllowSameToken also accepts an equal one, so that one lease can
// write several times). Pass the lease's token with every write:
//
//	lease, err := client.Acquire(ctx, "inventory:1")
//	...
//	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if err := guard.Check(ctx, tx, "inventory:1", lease.Token()); err != nil {
//			return err // *StaleTokenError: the lease was lost, and someone newer wrote
//		}
//		_, err := tx.Exec(ctx, "UPDATE stock SET n = n - 1 WHERE id = 1")
//		return err
//	})
//
// A refused write returns a *StaleTokenError, for which
// errors.Is(err, fence.ErrStaleToken) holds.
//
// # PostgreSQL
//
// Postgres.Check runs in the caller's transaction: it upserts the
// resource's row of the turnstile_fences table (created by Migrate) with
// the token, only if the token is fresh, so the token and the business
// writes of the transaction commit together or not at all. The row stays
// locked until the transaction ends: concurrent writers of one resource
// are serialised. A stale token also aborts the transaction, so that it
// cannot commit even if the caller ignores the error.
//
// # Redis
//
// Redis.Set and Redis.IncrBy run one short script that compares the token
// with the resource's guard key, applies the write and records the token,
// atomically. The guard key of resource R is "{R}:guard" (GuardKey), or
// "P{R}:guard" with WithKeysOf(backend) for a redis lock backend whose
// keys have the prefix P: give it whenever the backend has a prefix, so
// that the backend's forced release (turnstile unlock --force) raises the
// guard key this guard reads, and so that the guard's keys lie under the
// prefix an ACL user is limited to. The guard key shares R's hash tag with
// the backend's keys of a lock on R ("P{R}", "P{R}:fence", …) without
// colliding with them, and it never expires: configure the server not to
// evict it (maxmemory-policy noeviction or a volatile-* policy), and
// persist it as durably as the data it guards — a lost guard key accepts
// any token once.
//
// A data key must not be a key a lock keeps: a write to "{R}:writer"
// would take the write lock of R from its holder and leave it blocked.
// So every name a lock or a guard uses after a resource's hash tag is
// reserved — "" (the lock itself), fence, released, guard, started,
// reentrant, readers, writer, writers, semaphore, semaphore:permits,
// queue, queue:alive and queue:seq — and Set and IncrBy refuse, with
// turnstile.ErrInvalidKey and before any round trip, a key named like any
// of them, of any resource under any prefix. The names are reserved one
// by one rather than by giving data keys a namespace of their own, so
// that DataKey's names stay what they were; the list is the redis
// backend's own, and a test checks it against every key the backend
// writes for every lock kind.
//
// On Redis Cluster, a script can touch keys of one hash slot only: data
// keys must share the resource's slot. DataKey(R, "stock") gives
// "{R}:stock" (Redis.DataKey, "P{R}:stock"), which does; any other key is
// refused with ErrCrossSlot.
//
// # In memory
//
// Memory guards state held in one process (tests, demos): Do runs a write
// function only if the token is fresh.
//
// # Limits
//
// A guard protects the writes that go through it. Tokens from different
// lock keys are unrelated: use the lock key as the resource, or one
// resource per lock key. A write that never reaches the storage (a
// network partition, a crash) is not refused, it is simply lost; the
// guard only makes sure that a late write cannot overwrite a newer one.
package fence

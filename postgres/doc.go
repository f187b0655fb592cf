// Package postgres is a turnstile backend on PostgreSQL.
//
// A lock on key is two things, and another owner can take key only when
// both are free:
//
//   - a session-scoped advisory lock, pg_try_advisory_lock on key's lock
//     id, held by one of a small fixed number of lock connections per
//     Backend (lock id → connection), so that any number of held locks
//     needs at most that many connections (one connection per held lock
//     exhausts pools at about 1,000 TPS);
//   - a row in table turnstile_locks with owner, fencing token and an
//     expiry on the server's clock.
//
// The row gives the lease its TTL: a holder that crashes — its session
// dies and its advisory locks go with it — still blocks others until the
// TTL runs out, like every other turnstile backend. The advisory lock
// gives exclusion between processes while the holder's session lives:
// even after the row expired, a paused holder whose session is alive keeps
// key until its Backend notices the local deadline has passed and unlocks
// (a timer per held key). A session that dies frees its advisory locks at
// once; the server notices a vanished client through TCP keepalives
// (set to about 25 s on lock connections), sooner when the client's kernel
// resets the connection.
//
// Advisory locks are reentrant per session, so owners of one Backend that
// share a lock connection are told apart by the row and by a map of
// key → owner kept in the Backend. Hence a lock can be extended and
// released only through the Backend that took it.
//
// Fencing tokens come from the row: a hybrid logical clock, max(token + 1,
// server time in µs), strictly increasing per key for as long as the row
// lives, and comparable with the Redis backend's tokens, which are made
// the same way (so they keep increasing across a fallback switch). Rows are never deleted (release blanks the owner), so the table
// keeps about 100 bytes per key ever locked; deleting rows by hand resets
// their tokens.
//
// Tenants. Advisory locks belong to the database, whatever the schema or
// role, so a key's lock id is the first 64 bits of HMAC-SHA256 keyed with
// the tenant's salt over the name of the schema that holds
// turnstile_locks and the key. Tenants in schemas of their own lock one
// key under ids of their own; the salt, 64 random bits made by the
// tenant's first Dial and kept as the token of the row of the empty key
// (which no lock has; never delete it while a client runs), is read only
// by roles that may read turnstile_locks, so a role that may only connect
// cannot compute the id of a key. It can still take any id it sees held
// in pg_locks once it is free, and keep that key from every client:
// Inspect shows such a holder (see below), and docs/security.md says what
// else helps. Each Dial reads the schema's name and the salt; the set-up
// (tables, functions, and the serialising advisory lock it takes) runs
// only when this version's set-up is not done in the schema yet.
//
// Two keys of one tenant whose ids collide (about one chance in 2^64 per
// pair of keys) cannot be held through two Backends at once: an
// acquisition that finds its id held while another key's live lease has
// the same id (each row records the id it was taken under) fails with
// ErrLockIDCollision naming that key, rather than waiting for a lock it
// cannot have.
//
// Connections: WithConns lock connections (default 4), plus one LISTEN
// connection once a waiter asks for release notices (driver.Notifier;
// Release sends NOTIFY turnstile_released with the key). Renewals that
// fall due together go out as one UPDATE per lock connection
// (driver.BatchExtender). The server's lock table must have room for
// every advisory lock held at once: it holds max_locks_per_transaction ×
// (max_connections + max_prepared_transactions) locks in all, 6,400 with
// the defaults.
//
// If a lock connection breaks (server restart, network), every advisory
// lock on it is gone: Extend of those keys reports them lost, and the
// connection is dialled again on next use.
//
// Inspection and forced release (driver.Inspector, driver.ForceReleaser,
// behind turnstile status, ls and unlock --force). Inspect reads key's row
// — owner, token, time left on the server's clock — in one query; the
// store keeps no queue, so Waiters is -1. When the row has no live lease
// but a session holds key's advisory lock (a holder paused or removed
// past its lease, or a role outside turnstile), Inspect reports key held
// by that session: an owner naming its pid, user, application and client
// address, TTL -1 (it lasts as long as the session), so that an operator
// can end it with pg_terminate_backend; List and ForceRelease see rows
// only. List reads the range of keys
// that start with the prefix, in byte order, through the index
// turnstile_locks_key_c (on key COLLATE "C", which Dial creates),
// skipping free and expired rows: since rows outlive their locks, it reads
// the rows of every key ever locked under the prefix until it has one more
// held lock than asked for, and never the rest of the table.
// ForceRelease, in one transaction, frees key's row, raises its token by
// one (the floor it returns), sends the release notice, and, where
// fence.Postgres's table turnstile_fences exists, raises the guard of the
// resource named like the key to that floor, so that the removed holder's
// writes through the guard are refused even with AllowSameToken. The
// removed holder's advisory lock goes when its Backend next renews — it
// finds the row freed, reports the lock lost, lets go and tells waiters —
// or at its local deadline; a forced release through the holding Backend
// drops it at once. Until then other Backends cannot take key.
//
// Lock kinds (driver.Reentranter, driver.Semaphorer, driver.ReadWriter,
// behind turnstile.Reentrant, Semaphore and ReadWrite). Their holders are
// rows of table turnstile_holds — key, kind, owner, re-entry count, a
// semaphore's number of permits, token, expiry on the server's clock —
// which Dial adds beside an existing turnstile_locks. An acquisition is
// one call of function turnstile_hold_acquire, which looks at the live
// holders, then locks the key's turnstile_locks row, looks again, and
// takes the row's next token: tokens of every kind continue the plain
// lock's. The kinds take no advisory lock, so their leases last exactly as
// long as their rows, as on Redis; a plain and a reentrant lock on one key
// do not exclude each other. A semaphore's number of permits is stored in
// its holders' rows, and another number is refused while any is held. The
// read-write lock prefers writers: a refused writer's claim row keeps new
// readers out until it expires (turnstile.WithWriterClaim). Releases send
// the plain lock's notice. There is no fair view (the store keeps no
// queue). A view is a driver.Inspector and driver.ForceReleaser of its
// kind's holders (both sides of a read-write lock show and remove readers
// and writer alike); the Backend's Inspect, List and ForceRelease see
// plain locks only.
//
// TLS and least privilege. The TLS parameters every turnstile URL takes —
// ca_file, cert_file, key_file, server_name — turn on sslmode=verify-full
// with that configuration for every host (libpq's sslrootcert, sslcert
// and sslkey work too, not mixed with them); password_file reads the
// password from a file. The role needs a schema of its own, which Dial
// creates its table and functions in; a refused privilege (SQLSTATE
// 42501) is turnstile.ErrPermission. docs/security/postgres.md has the
// recipe.
package postgres

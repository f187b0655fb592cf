// Package mysql is a turnstile backend on MySQL 5.7+ or MariaDB 10.0.2+,
// registered for turnstile.Open under the scheme mysql:
//
//	mysql://user:password@host:3306/db?conns=4&dial_timeout=5s
//
// # How a lock is held
//
// A lock is two things on the server. The first is a named user lock,
// GET_LOCK(name, 0), taken on one of a small fixed set of connections the
// Backend pins for its lifetime (conns, default 4; the key picks the
// connection). GET_LOCK is per session, so any number of locks needs
// only those connections, and a session that dies — process crash,
// network cut, KILL — frees its locks on the server at once. The second is
// a row in the table turnstile_locks (created on Dial) holding the owner,
// the fencing token and an expiry computed by the server's clock. The row
// keeps the lock unavailable to others until its TTL ends even when the
// session died earlier: a holder cut off from the server still believes
// it holds the lock until its local deadline, so the lock must not pass on
// before then.
//
// Several owners of one Backend share its connections; GET_LOCK is
// re-entrant per session, so the Backend tells them apart in memory.
// Between processes, and between Backends, GET_LOCK and the row exclude.
//
// A key's row is named by LockName: the key itself, or, for keys longer
// than 64 bytes and keys that start with "ts:", "ts:" and 61 hex digits
// of the key's SHA-256, so that no key's name is another's.
//
// # Tenants
//
// User-lock names are the server's, shared by every database and every
// account that may connect (GET_LOCK needs no privilege), so a key's user
// lock is named "turnstile:" and 54 hex digits of HMAC-SHA256 keyed with
// the tenant's salt over the database's name and the key. Tenants in
// databases of their own lock one key under names of their own; the
// salt, 64 random bits made by the tenant's first Dial and kept as the
// token of the row of the empty name (which no key has; never delete it
// while a client runs), is read only by accounts that may read
// turnstile_locks, so an account without privileges cannot compute the
// name of a key. One that may see the server's locks (PROCESS, or
// performance_schema) can still take a name it saw held once it is
// free, and keep that key from every client: Inspect shows such a holder
// (see below), and docs/security.md says what else helps.
//
// # Expiry
//
// The server does not expire user locks, so the Backend does: a lock whose
// TTL passes without Extend is released by a sweeper every 25 ms, and any
// operation on it finds it expired. The row's expiry, on the server's
// clock, is the authority for other processes.
//
// Operations on one connection run one at a time. A statement is bounded
// by its context's deadline but not interrupted by cancellation: the driver
// would close the connection and so end every lock on it. When a
// connection fails anyway, its locks end on the server; their rows keep
// others out until their TTLs, and their owners learn of the loss at
// their next Extend. ExtendMany renews all locks of one connection in one
// statement.
//
// # Inspection and forced release
//
// Backend is a driver.Inspector and driver.ForceReleaser (turnstile
// status, ls and unlock --force). Inspect reads the name's row — owner,
// token, time left on the server's clock — in one query; the store keeps
// no queue, so Waiters is -1. When the row has no live lease but a
// session holds the key's user lock (a holder paused or removed past its
// lease, or an account outside turnstile), Inspect reports the key held
// by that session: an owner naming its connection id (and its user and
// client address, where the account may see them), TTL -1 (it lasts as
// long as the session), so that an operator can end it with KILL; List
// and ForceRelease see rows only. List reads the byte range of names that
// start with the prefix through the primary key, skipping free and
// expired rows: since rows outlive their locks, it reads the rows of every
// name ever locked under the prefix until it has one more held lock than
// asked for, and never the rest of the table. Keys longer than 64 bytes,
// and keys that start with "ts:", are listed under their names
// (LockName), which only a prefix of the name finds. ForceRelease frees the row and raises its token by one (the
// floor it returns) in one transaction. The removed holder's user lock
// goes when its Backend next renews — it finds the row freed and reports
// the lock lost — or at its local deadline; a forced release through the
// holding Backend frees it at once. Until then other Backends cannot take
// the key.
//
// # Guarantees and limits
//
//   - Pause: a paused holder process keeps its session and so its user
//     lock; the row expires after the TTL, but other processes still wait
//     for the user lock until the holder runs again, sweeps, or its
//     connection is dropped (wait_timeout, default 8 hours). A pause never
//     yields two holders; it can delay others beyond the TTL. The holder's
//     own lease ends at its local deadline, as with every backend.
//   - Partition: the holder's Extend fails and its lease ends at its local
//     deadline. The server frees the cut-off session's user locks only when
//     it notices the dead connection — at once if the holder's process
//     died, else at wait_timeout (default 8 hours) or TCP keep-alive — and
//     the row only at its expiry, so no one else takes the lock before the
//     TTL, but others may wait long after it: lower wait_timeout (say, to a
//     minute) for the lock user; a Backend whose watchdog renews locks keeps
//     its connections busy, and one whose idle connection was closed dials
//     a new one on the next Acquire.
//   - Restart: user locks do not survive a server restart; rows do, so
//     after a restart no lock passes on before its row expires. Tokens stay
//     increasing only if the row's last update was durable
//     (innodb_flush_log_at_trx_commit=1, the default) and, with
//     replication, if failover waits for the replica to apply it.
//   - Clock jumps: expiry is measured on the server's clock (NOW(6)) for
//     other processes and on the Backend's monotonic clock for its own
//     sweeper; a jump of the server's wall clock moves every row's expiry
//     by the jump: forward frees leases early, backward holds them longer.
//   - Fencing: tokens come from the row, a hybrid logical clock
//     max(token + 1, server time in µs) (LAST_INSERT_ID(GREATEST(...))),
//     strictly increasing per name, across restarts (see above), and
//     comparable with the Redis and PostgreSQL backends' tokens, which are
//     made the same way.
//
// Lock kinds (driver.Reentranter, driver.Semaphorer, driver.ReadWriter,
// behind turnstile.Reentrant, Semaphore and ReadWrite). Their holders are
// rows of table turnstile_holds — name, kind, owner, re-entry depth, a
// semaphore's number of permits, token, expiry on the server's clock —
// created on a kind's first use, so accounts that take only plain locks
// need no grant on it. An acquisition first reads the live holders with
// one statement, and only if the key may be had runs a read-committed
// transaction that locks the name's turnstile_locks row, reads them again
// and takes the row's next token: tokens of every kind continue the plain
// lock's. The kinds take no GET_LOCK, so their leases last exactly as long
// as their rows; a plain and a reentrant lock on one key do not exclude
// each other. A semaphore's number of permits is stored in its holders'
// rows, and another number is refused while any is held. The read-write
// lock prefers writers: a refused writer's claim row keeps new readers out
// until it expires (turnstile.WithWriterClaim). Waiters poll; there is no
// fair view (the store keeps no queue). A view is a driver.Inspector and
// driver.ForceReleaser of its kind's holders; the Backend's Inspect, List
// and ForceRelease see plain locks only.
//
// TLS and least privilege. The TLS parameters every turnstile URL takes —
// ca_file, cert_file, key_file, server_name — connect with TLS and the
// server's certificate verified (tls=true alone verifies against the
// system's roots); password_file reads the password from a file. The
// user needs CREATE, SELECT, INSERT and UPDATE on turnstile_locks; a
// refused privilege is turnstile.ErrPermission. docs/security/mysql.md
// has the recipe.
package mysql

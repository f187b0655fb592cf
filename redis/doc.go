// Package redis is the Redis backend of turnstile: a lock is a Redis key
// set with SET NX PX, owner-checked on extend and release, each operation
// one Lua script and one round trip.
//
//	b, err := redis.New(rueidisClient)            // or redis.NewGoRedis(goRedisClient)
//	c, err := turnstile.New(b)
//
//	c, err := turnstile.Open(ctx, "redis://127.0.0.1:6379/0")  // after importing this package
//	c, err := turnstile.Open(ctx, "redis://h1:7000,h2:7000,h3:7000")  // a Redis Cluster
//	c, err := turnstile.Open(ctx, "redis+sentinel://s1:26379,s2:26379,s3:26379/mymaster?wait_replicas=1")
//
// Several hosts in one URL are one Redis Cluster (the list need not be
// complete), not independent servers: for those, use package redlock.
//
// # Keys
//
// For a lock key K and prefix P (WithPrefix, default none) the backend uses
//
//	P{K}            the lock: owner id, expires after the lease TTL; the byte
//	                \x01 follows the owner once another owner failed to take
//	                it, and stands alone (for a grace period) when a lock so
//	                marked was released quietly to a waiter of the same client
//	P{K}:fence      the last fencing token of K, expires the lease TTL + a
//	                grace period after the last grant or renewal
//	P{K}:released   channel on which a release is published when someone
//	                failed to take the lock while it was held (a shard
//	                channel, SPUBLISH, on Redis 7.0 and later)
//	P{T}:started    with WithRestartQuarantine only: when the server process
//	                started, one key per hash tag T
//	P{K}:guard      package fence's guard of resource K, made with
//	                fence.WithKeysOf(b): ForceRelease raises it
//
// and the lock kinds add theirs (Reentrant, ReadLock and WriteLock,
// Semaphore, Fair).
// The braces make K the Redis Cluster hash tag, so a lock's keys share a
// slot and one script can touch them all. Keys may contain braces themselves
// (lock:inventory:{w1}:{p9} is fine); a key beginning with '}' or '\' is
// stored with a leading '\' so that its tag is never empty. Every key
// lies under the prefix, so an ACL user limited to it runs every call,
// forced releases included, and touches no other prefix's keys. The
// names after the tag are reserved: package fence refuses to write any
// of them as data, of any key under any prefix.
//
// # Fencing tokens
//
// A token is a hybrid logical clock per key: max(last+1, server time in
// µs) rounded up to a multiple of 16, where last is the key's previous
// token, kept in the fence key. The
// fence key lives for the lease TTL and a grace period (WithFenceGrace,
// default 10 s) after the lock's last grant or renewal, so tokens cost no
// memory for keys that are no longer locked, however many distinct keys
// are used.
//
// The server time is the client's reading of the server's clock: the
// server's TIME, sampled at most every 10 s, plus the time elapsed on the
// client since (the greater of its monotonic and wall clocks' elapsed
// time, so that neither a machine suspended nor a wall clock stepped back
// makes it lag) plus the sample's round trip: it errs high by a round
// trip, never low by more than the two clocks' drift over 10 s. The
// scripts thus need no TIME of their own (one command less per grant);
// they read TIME when the client has no reading (before the first sample,
// or after a failed one).
//
// Every token is a multiple of 16 (Backend.TokenRoom), so the next one is
// at least 16 above it: a turnstile Client hands a held lock to its own
// next waiter with the token plus one, up to 15 times, without a round
// trip; the lock stays held under the same owner id, and the store's next
// grant is above every token handed out (package turnstile, "handoffs
// without the store").
//
// Tokens of a key strictly increase as long as the Redis server's clock
// does not step back by more than the grace period. While the fence key
// exists, the next token is at least last+1 whatever the clock does. Once
// it is gone — expired after the grace period, evicted, or lost in a
// restart without persistence — the next token is the server time, which
// is past every earlier token: each token is at most the time it was
// issued (one key cannot be locked more than once per microsecond), and
// the clock has moved on since. A clock that steps back, or a failover to
// a replica whose clock lags, breaks this only if the step exceeds the
// time since the last token was issued and the fence key is gone too.
// Keep server clocks synchronised (NTP slews rather than steps) and the
// grace period longer than any step you expect.
//
// # Restarted servers
//
// A server that restarts without its data forgets the locks it held. With
// WithRestartQuarantine(d) the acquire script notices that the hash slot's
// P{T}:started marker is gone and refuses to grant any lock in that slot
// until d has passed since the server started (ErrQuarantined): holders
// that lost their lock to the restart learn it at their next renewal, and
// their leases end before anyone else can be granted the key. d must be at
// least the longest TTL any client uses. Off by default on a single node;
// package redlock turns it on for its nodes.
//
// # Replicas and Sentinel
//
// A redis+sentinel:// URL names the Sentinels that watch a primary and its
// replicas, and the master set they watch it under: the client asks them
// where the primary is and follows a failover to the replica they
// promote. Replication is asynchronous: a lock granted just before the
// primary fails may not have reached the replica promoted in its place,
// which then grants it again. WithWaitReplicas (wait_replicas=N in a URL)
// makes every grant and renewal wait until N replicas have it (Redis's
// WAIT, sent on the grant's own connection), and fail, releasing the
// grant, when fewer confirm in time: a *ReplicationError, which a Client
// retries as it retries an outage. docs/guarantees.md says what this does
// and does not make safe.
//
// # What a lock does not guarantee
//
// A single Redis server, or a primary with asynchronous replicas, can lose
// a lock: a restart without persistence or a failover before the write was
// replicated frees it while its holder still runs. The fencing token
// still grows across such a loss, so storage that checks tokens refuses
// the late writes of the old holder. WithWaitReplicas narrows the
// failover case; use several independent servers with package redlock to
// make losing a lock need a majority of failures.
//
// TLS and ACLs. rediss:// — or any of the TLS parameters every turnstile
// URL takes, ca_file, cert_file, key_file and server_name — connects with
// TLS and the server's certificate verified, to every node of a cluster
// alike; user:password@ (or password_file) logs in as a Redis ACL user. A
// command, key or channel the user may not touch is a PermissionError,
// which is turnstile.ErrPermission. docs/security/redis-acl.md gives the
// user exactly what turnstile sends, command by command.
package redis

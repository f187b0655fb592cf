// Package zookeeper is a turnstile backend on Apache ZooKeeper, with the
// recipe ZooKeeper's documentation and Apache Curator use for locks:
// every contender creates an EPHEMERAL_SEQUENTIAL node under the key's
// directory, the lowest sequence number holds the lock, and each waiter
// watches only its predecessor, so the lock passes in arrival order
// (driver.Queuer) without a thundering herd.
//
//	/turnstile/locks/<escaped key>/<escaped owner>-0000000042
//
// # Liveness: the session, and the TTL
//
// ZooKeeper frees a lock when the session that created its node ends:
// when the holder closes its Backend, or when the server has heard nothing
// from the client for the session timeout (a crash, a pause or a
// partition longer than it). A Backend has one session; its timeout is
// WithSessionTimeout (default 30 s, the same as turnstile's default TTL;
// the server grants it within its [min,max]SessionTimeout range, and
// GrantedSessionTimeout says what it granted). turnstile.Open makes it
// the Client's TTL unless the URL sets session_timeout, so that a
// crashed holder's lock lasts about its TTL, as on every other store
// (see Open URLs below).
//
// A lease longer than the session would outlive, in its holder's view,
// a session the server expired: a Backend grants and renews a lease only
// for a TTL the granted session covers. A longer one is refused with
// turnstile.ErrInvalidOption, naming both figures — by Open, when the
// servers' maxSessionTimeout cut the session it asked for. When a
// reconnection cuts the session below the TTL of held locks, their next
// Extend gives them up and reports them lost.
//
// The per-call TTL of the driver SPI is kept by the Backend that took the
// lock: it deletes its node when the TTL passes without an Extend, so a
// holder that stops renewing (turnstile.WithoutWatchdog) frees the key at
// its TTL as on every other backend. The TTL is measured with the holder's
// monotonic clock and the session timeout with the server's, so neither
// depends on wall clocks. Extend and Release work from any Backend, but
// only the Backend that acquired a lock runs its TTL timer.
//
// # Fencing token
//
// The token is a zxid, ZooKeeper's transaction id, which the ensemble
// makes strictly increasing across all keys and across leader changes
// (the epoch is its high 32 bits): the zxid of the transaction that
// created the holder's node, when the node is first in line and no node
// came or went in the key's directory since (the directory's Pzxid is
// still that zxid: every node ahead of it was gone before it came, so
// nobody was granted the lock since); otherwise — a lock granted after
// waiting in the queue, taken again by its owner, or whose queue changed
// between the node's creation and the look that found it first — the
// zxid of a write made at the moment of the grant. So every token is
// larger than every token issued before it.
//
// # Lock kinds
//
// Beside the plain lock, which is fair as it is (turnstile.Fair returns
// the Backend), the Backend gives Curator's other recipes as views, each
// in a directory of its own next to the key's, with the same ACL:
// Reentrant (a counted hold, <escaped key>.reentrant), ReadWrite
// (readers and writers in one queue, <escaped key>.rw) and Semaphore
// (one lease per holder, named with the number of permits,
// <escaped key>.semaphore). Their tokens are the zxids that created the
// holders' nodes. See each type.
//
// # Inspection and forced release
//
// Backend is a driver.Inspector and driver.ForceReleaser (turnstile
// status, ls and unlock --force). Inspect lists key's directory and reads
// the stat of its first node: two reads. A holder's TTL is -1: its lock
// lasts as long as its node and session, and its TTL timer runs in its
// own Backend, not in ZooKeeper. Waiters counts the queue behind the
// holder. ZooKeeper has no range reads, so List reads the names of every
// key directory under the root in one request — a reply that grows with
// the number of keys that have a directory: held, queued, or freed within
// about the last minute, before the server removes empty containers — and
// inspects the keys under the prefix in key order, 32 at a time, until it
// has one more held lock than asked for. ForceRelease deletes the holder's
// nodes and writes to key's directory in one multi-op (reading the queue
// again if it changed meanwhile): the waiter watching the holder's node
// wakes as on a release, the holder's next Extend finds it is no longer
// first and reports the lock lost, and the multi-op's zxid, returned as
// the floor, is above the removed holder's token and below every later
// one.
//
// # Connection states
//
// As in Curator: while the client is disconnected (SUSPENDED) the session
// may still be alive, and Acquire, Extend and Release fail at once with
// ErrSuspended (a transient error: the watchdog retries, and the lease
// ends at its local deadline if the connection does not come back).
// When the session has expired (LOST) its nodes are gone: Extend returns
// false and the lease is lost at once, and the client carries on with a
// new session.
//
// # Guarantees and their limits
//
//   - Pause of the holder: shorter than the session timeout, nothing
//     happens in the store beyond the TTL timer, which fires when the
//     process runs again (the lock may be held a little past its TTL, never
//     less). Longer, the server expires the session and another contender
//     takes the lock; the paused holder's lease has ended locally by then
//     as long as its TTL is at most the session timeout.
//   - Partition: the server frees the lock one session timeout after it
//     last heard from the holder. A lease renewed just before the
//     partition ends locally before that, since its TTL is at most the
//     session timeout granted (longer ones are refused).
//   - Server restart or leader failover: sessions survive a failover in an
//     ensemble if the client reconnects within the session timeout; a
//     standalone server that restarts keeps sessions it has persisted.
//     Tokens keep increasing either way.
//   - Clock jumps: neither the TTL (Go's monotonic clock) nor session
//     expiry (the server's monotonic clock) reads wall clocks.
//
// # Authentication and node ACLs
//
// With credentials (WithDigestAuth; user:password@ in the URL, or the
// password in password_file) the session authenticates with ZooKeeper's
// digest scheme, again after every reconnection, and every node the
// Backend creates — lock nodes, key directories, and the root and its
// parents when it creates them — gets the ACL digest:user:password with
// all permissions and nothing for anyone else. ZooKeeper checks a delete
// against the parent's ACL, so a client without the credentials cannot
// delete a holder's node, join a queue or list one; its requests fail
// with ZooKeeper's NOAUTH error, which a Backend wraps in
// turnstile.ErrPermission.
// Nodes that exist already keep their ACLs: the Backend checks the ACL
// of the root when it dials, and of each key and kind directory before
// it keeps a lock node there, and refuses one that grants anything to
// anyone else (ErrOpenACL), which would let them delete its holders'
// nodes. Without credentials nodes are open to everyone (world:anyone,
// all permissions).
//
// # TLS
//
// With WithTLS (ca_file, cert_file, key_file, server_name or tls=on in
// the URL) the client reaches the servers' secureClientPort over TLS and
// verifies their certificates; Dial gives up when every attempt is
// refused for a certificate, and its errors say what the last attempt
// met, with a hint when a port seems to expect TLS or not.
//
// Dial waits for a session for its dial timeout at most (WithDialTimeout,
// dial_timeout in the URL, default 5 s), whatever its context.
//
// Open URLs have the form
//
//	zookeeper://[user:password@]host[:port][,host[:port]...][/chroot][?session_timeout=30s&dial_timeout=5s]
//
// plus the TLS parameters ca_file, cert_file, key_file, server_name and
// tls=on|off. Without session_timeout, the session timeout is the Client's lease TTL,
// at least MinSessionTimeout (2 s). With it, a Client TTL longer than it
// is refused with turnstile.ErrInvalidTTL, and a TTL longer than the
// session the servers granted with turnstile.ErrInvalidOption. The server raises a session
// timeout below its minSessionTimeout (2 × tickTime, 4 s by default) to
// that minimum and expires sessions up to one tick late, which is the
// store's granularity for a crashed holder's lock.
package zookeeper

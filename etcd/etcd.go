// Package etcd is a turnstile lock store on etcd's v3 API.
//
// A lock on key is the etcd key <prefix>locks/<key> (prefix "/turnstile/"
// by default) whose value is the owner, attached to an etcd lease that
// the backend's locks of the same TTL (in whole seconds) share, as the
// locks of one concurrency.Session share its lease: granted once, renewed
// by every Extend and by acquisitions (by those of a Client only when its
// last renewal is over a tenth of the TTL old: see Waiting), left to
// expire when nothing renews it. A pair of Acquire and Release is then
// two writes to etcd's log — the key's put and its delete, each in a
// transaction that compares the owner — where a lease per lock cost
// four. The lease is what expires: when the holder dies, stops renewing
// or is cut off, etcd deletes the key once the lease's TTL has run out
// on the etcd leader.
// A lease that ends (expired, or revoked behind the backend's back) ends
// exactly the locks on it: each holder's next Extend reports its lock
// lost, and the next acquisition takes a new lease. Since other locks
// keep the lease renewed, each lock also has a deadline of its own — the
// start of its last grant or Extend plus its TTL, as a lease of its own
// would — and the backend deletes a lock whose deadline passed without
// an Extend (a transaction that compares the key's mod revision with the
// write that granted it, so a key taken again is never touched): a
// holder that stopped renewing, or whose renewals failed, does not leave
// its lock held for as long as the backend lives. Extend checks the
// owner and renews the lease (LeaseKeepAlive);
// turnstile's watchdog calls it, so the watchdog is the keep-alive, and a
// refused or failed renewal cancels Lease.Context(). Every renewal of a
// backend — holders' and waiters' — goes out on one stream it keeps
// open, and its waiters' watches share another: with etcd's
// authentication on, a client logs in whenever it opens a stream, and
// each login costs etcd a bcrypt hash, so a burst of waiters costs no
// logins of its own.
//
// Fencing token: the etcd revision of the write that granted the lock —
// the key's create revision, or, when the same owner takes the lock again
// (a retry after a lost reply) or a release hands it to a waiter, the mod
// revision of that write. etcd
// revisions are cluster-wide and only grow, so every token for a key is
// larger than every earlier one, across owners, clients and restarts of a
// member (the revision survives in the data directory and in the quorum).
//
// TTLs: etcd leases count whole seconds, so a TTL is rounded up to the
// next second, and etcd raises TTLs below its minimum (1.5 × the election
// timeout, rounded up: 2 s with default flags). The store may therefore
// hold a lock somewhat longer than asked, never shorter; turnstile's own
// deadline still uses the TTL you asked for. An Extend with a TTL shorter
// than the lease's renews the lease with its own, longer TTL; a longer one
// moves the key to the shared lease of the longer TTL.
//
// Waiting: Backend implements driver.Queuer like etcd's
// concurrency.Mutex. One transaction takes the lock when it is free and
// nobody is queued for it, or else writes the waiter's key
// <prefix>queue/<escaped key>/<owner> under the shared lease; the waiter
// watches only the deletion of the waiter just ahead of it (by create
// revision), then takes the lock key, watching it for deletion while
// another holds it. When the first waiter in line is one of the
// backend's own, a release gives it the lock in the same transaction —
// which checks that no waiter came before it — and tells it directly:
// one write per handoff instead of a delete and the waiter's put after a
// watch event. Locks pass to queued waiters in arrival order;
// TryAcquire does not queue and may take a free lock ahead of the queue.
// A grant says from when the shared lease holds the lock
// (driver.TimedQueuer), so the Client does not renew it before handing
// it out; the lease is renewed with the grant only when its last
// renewal is over a tenth of the TTL old. A Client's Acquire and Release
// of a free key are then two calls to etcd, the two writes.
//
// Lock kinds (turnstile.Reentrant, Semaphore, ReadWrite, Fair): Reentrant,
// Semaphore, ReadLock and WriteLock are views of a Backend that keep
// their keys under <prefix>reentrant/, semaphore/ and rw/, each hold
// under a lease of its own and each token a revision, as above; see each
// type. Backend itself is the fair lock: its queue serves waiters in
// arrival order and reports their places.
//
// Inspection and forced release (driver.Inspector, driver.ForceReleaser,
// behind turnstile status, ls and unlock --force). Inspect reads the lock
// key and counts key's queue in one read-only transaction, then asks for
// the lease's time left (LeaseTimeToLive): two round trips. A holder's
// token is the lock key's mod revision. List is one range read of
// <prefix>locks/<key prefix>, limited to the number of locks asked for,
// plus a lease read per lock returned (16 in flight) and a queue count per
// 100 of them: its cost grows with the locks it returns, not with the
// store. ForceRelease deletes the lock key in one transaction, as a
// release does — waiters watching it wake, the holder's next Extend finds
// it gone and reports the lock lost; the holder's lease stays, since its
// other locks may share it. It needs no write for the token floor:
// tokens are revisions, and the transaction's revision, which it
// returns, is above the removed holder's token and below every later
// one.
//
// Transport security and access. Dial speaks TLS when cfg.TLS is set
// (URLs: ca_file, cert_file, key_file, server_name or tls=on) and logs in
// with cfg.Username and cfg.Password when etcd's authentication is on.
// The user's role needs readwrite on the prefix's key range and nothing
// else; a request it does not cover fails with an error that matches
// turnstile.ErrPermission and names the lock key.
//
// Guarantees and limits. The holder's deadline runs on its own monotonic
// clock from before it asked; etcd counts a lease on the leader's
// monotonic clock from when it granted or renewed it, so the store
// expires a lock after the holder stopped trusting it, and wall-clock
// jumps on either side change nothing. A paused holder (GC, SIGSTOP, VM
// migration) can wake after its lease expired and act before it notices:
// check the fencing token where that matters. A client cut off from the
// quorum cannot renew: its watchdog reports the lock lost when the local
// deadline passes, and the quorum side expires the lease no earlier. When
// leadership moves — a leader crash, a restart of a one-member cluster, a
// partition — the new leader restarts every lease at its full TTL plus an
// election timeout, so a renewal answered by a deposed leader is still
// covered, and the lock of a crashed holder may linger up to that much
// longer. Locks and revisions are in the replicated log, so they survive
// member restarts; tokens never go back.
package etcd

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/turnstilelock/turnstile/driver"
)

var (
	_ driver.Backend       = (*Backend)(nil)
	_ driver.Queuer        = (*Backend)(nil)
	_ driver.TimedQueuer   = (*Backend)(nil)
	_ driver.TimedAcquirer = (*Backend)(nil)
	_ driver.Namer         = (*Backend)(nil)
)

// Backend is a lock store on an etcd cluster. It is safe for concurrent
// use.
type Backend struct {
	cli     *clientv3.Client
	owns    bool // Close closes cli
	cfg     config
	ka      *renewer  // sends lease renewals on one stream
	leases  leasePool // the shared leases of the plain locks and their waiters
	waiting lines     // the plain locks' waiters of this backend, per key
	hold    anchor    // keeps the waiters' watch stream open
	sweep   sweeper   // ends the plain locks whose own deadline passed
	batch   batcher   // puts concurrent writes in one transaction

	bg       sync.WaitGroup // lease revocations that outlive their caller's context
	stop     chan struct{}  // closed by Close: cancels them
	stopOnce sync.Once

	beforeWatch func() // tests: runs before a waiter opens its watch
}

// New returns a backend over cli. Closing the backend leaves cli open;
// close the backend (or cli) to end the streams it keeps open for its
// renewals and watches.
func New(cli *clientv3.Client, opts ...Option) (*Backend, error) {
	if cli == nil {
		return nil, errors.New("etcd: nil client")
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	return &Backend{cli: cli, cfg: cfg, ka: newRenewer(cli), batch: batcher{max: cfg.batch}, stop: make(chan struct{})}, nil
}

// Dial connects a client of the backend's own with cfg and returns a
// backend over it; Close closes that client. With cfg.DialTimeout set it
// waits until a connection is up (and, with cfg.Username, logged in);
// ctx bounds that wait too. Its error then says why the connection
// failed, such as a certificate that does not verify, with a hint when
// the members may expect TLS or a client certificate.
func Dial(ctx context.Context, cfg clientv3.Config, opts ...Option) (*Backend, error) {
	c := defaultConfig()
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if dl, ok := ctx.Deadline(); ok && (cfg.DialTimeout == 0 || time.Until(dl) < cfg.DialTimeout) {
		cfg.DialTimeout = max(time.Until(dl), time.Millisecond)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.DialTimeout > 0 {
		// Wait for the connection, and say why it failed rather than only
		// that the time ran out: a certificate refused, TLS expected.
		// clientv3 dials with grpc.DialContext, which supports both.
		//lint:ignore SA1019 deprecated only for grpc.NewClient, which clientv3 does not use
		cfg.DialOptions = append([]grpc.DialOption{grpc.WithBlock(), grpc.WithReturnConnectionError()}, cfg.DialOptions...)
	}
	if cfg.TLS != nil && cfg.TLS.ServerName != "" {
		// gRPC checks the member's certificate against the host dialled
		// unless the authority says otherwise.
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithAuthority(cfg.TLS.ServerName))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		err = dialErr(cfg, err)
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
		return nil, err
	}
	return &Backend{cli: cli, owns: true, cfg: c, ka: newRenewer(cli), batch: batcher{max: c.batch}, stop: make(chan struct{})}, nil
}

// Client returns the etcd client the backend uses.
func (b *Backend) Client() *clientv3.Client { return b.cli }

// Close cancels the lease revocations still under way, closes the
// streams the backend keeps open (lease renewals, the waiters' watches),
// and closes the client if Dial made it.
func (b *Backend) Close() error {
	b.stopOnce.Do(func() { close(b.stop) })
	b.bg.Wait()
	b.stopSweeper()
	b.ka.close()
	b.hold.close()
	if !b.owns {
		return nil
	}
	return b.cli.Close()
}

// Name implements driver.Namer: "etcd" and the endpoints.
func (b *Backend) Name() string { return "etcd " + strings.Join(b.cli.Endpoints(), ",") }

// HoldsTTL implements driver.TTLHolder: the lock key lives on a lease
// granted with the TTL rounded up to whole seconds, and Extend moves it
// to a longer lease when the TTL asks for more (extendKeys), so a lock
// lasts at least the TTL of its last Acquire or Extend. The lock kinds'
// views do not offer it.
func (b *Backend) HoldsTTL() bool { return true }

// LockKey is the etcd key that holds the lock on key.
func (b *Backend) LockKey(key string) string { return b.cfg.prefix + "locks/" + key }

// queuePrefix is the directory of key's waiters. The key is escaped so
// that no key's directory contains another's ("a/" and "a/b/").
func (b *Backend) queuePrefix(key string) string {
	return b.cfg.prefix + "queue/" + url.PathEscape(key) + "/"
}

// leaseSeconds rounds ttl up to whole seconds, as etcd leases count.
func leaseSeconds(ttl time.Duration) int64 {
	s := int64((ttl + time.Second - 1) / time.Second)
	return max(s, 1)
}

// cleanupCtx bounds work that must happen even though ctx is done, such
// as revoking the lease of a failed attempt.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// DefaultSessionTimeout is the session timeout when WithSessionTimeout is
// not given: turnstile's default TTL, so that by default a partitioned
// holder's lease ends locally before the server frees its lock.
const DefaultSessionTimeout = 30 * time.Second

// DefaultRoot is the directory under which lock nodes live.
const DefaultRoot = "/turnstile/locks"

// DefaultDialTimeout bounds how long Dial waits for a session when
// WithDialTimeout is not given, as the other stores' dial timeouts do.
const DefaultDialTimeout = 5 * time.Second

// ErrSuspended means the client is disconnected from ZooKeeper and its
// session may or may not still be alive (Curator's SUSPENDED): the holder
// must not assume it still holds its locks. It is transient.
var ErrSuspended = errors.New("zookeeper: connection suspended")

// Backend is a lock store on a ZooKeeper ensemble, with one session.
type Backend struct {
	conn    *zk.Conn
	tracker *connTracker // of the client's connections: the session granted
	servers string
	root    string
	timeout time.Duration // the session timeout asked for
	logger  *slog.Logger
	user    string      // the digest user, or ""
	acl     []zk.ACL    // of every node the Backend creates
	acls    *aclChecker // of the nodes the Backend uses, when user is set

	beforeList func() // tests: runs between an acquisition's new node and its first look at the queue

	mu     sync.Mutex
	closed bool
	holds  map[holdKey]*hold // locks this Backend took, with their TTL timers
	counts *countCache       // of the reentrant holds this Backend took; made on first use
	doomed map[doomed]func() // nodes to delete once the client has a session (reap.go)
	wg     sync.WaitGroup    // TTL deletions in flight, and the reaper

	reapKick chan struct{} // wakes the reaper: a node was doomed, or a session began
	reapStop chan struct{} // closed by Close
}

var (
	_ driver.Backend     = (*Backend)(nil)
	_ driver.Queuer      = (*Backend)(nil)
	_ driver.TimedQueuer = (*Backend)(nil)
	_ driver.Namer       = (*Backend)(nil)
)

// Option configures Dial.
type Option func(*config) error

type config struct {
	timeout        time.Duration
	dialTimeout    time.Duration
	root           string
	logger         *slog.Logger
	user, password string      // digest credentials, or ""
	tls            *tls.Config // reach the servers over TLS, or nil
}

// WithSessionTimeout sets the session timeout: how long the server keeps
// the session, and so the locks, of a client it no longer hears from.
// Default DefaultSessionTimeout. Keep lease TTLs no longer than it.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("session timeout %v is shorter than 1ms", d)
		}
		c.timeout = d
		return nil
	}
}

// WithDialTimeout bounds how long Dial waits for a session: it fails,
// naming the servers and what the last connection attempt said, when
// none has granted one within d, however long its context lasts.
// Default DefaultDialTimeout.
func WithDialTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("dial timeout %v is not positive", d)
		}
		c.dialTimeout = d
		return nil
	}
}

// WithRoot sets the directory under which lock nodes live, for example a
// chroot plus /turnstile/locks. Default DefaultRoot.
func WithRoot(path string) Option {
	return func(c *config) error {
		r, err := cleanRoot(path)
		if err != nil {
			return err
		}
		if r == "" {
			return errors.New("root must not be /")
		}
		c.root = r
		return nil
	}
}

// WithDigestAuth makes the session authenticate as user with password
// (ZooKeeper's digest scheme: AddAuth("digest", "user:password"), sent
// again on every reconnection), and gives every node the Backend creates
// — lock nodes, the key directories that hold them, and the root and its
// parents when it creates them — the ACL digest:user:password with all
// permissions, and nothing for anyone else. A client without these
// credentials can then neither read a queue, nor join it, nor delete a
// holder's node (ZooKeeper checks a delete against the parent's ACL);
// its requests fail with ZooKeeper's NOAUTH error (a Backend's with
// turnstile.ErrPermission). Every client of one root must use
// the same credentials. Without WithDigestAuth nodes get the ACL
// world:anyone with all permissions.
//
// Nodes made before, by others or without credentials, keep their ACL.
// So the Backend checks the ACL of the root when it dials (if the root
// exists and the user may read its ACL) and of every key or kind
// directory before it keeps a lock node there, and refuses one that
// grants any permission to anyone but user: the error wraps
// turnstile.ErrPermission and ErrOpenACL and names the node. Each
// directory is checked once per incarnation (the zxid that created it).
//
// user must not be empty nor contain ':', and password must not be
// empty.
func WithDigestAuth(user, password string) Option {
	return func(c *config) error {
		switch {
		case user == "":
			return errors.New("digest authentication without a user name")
		case strings.Contains(user, ":"):
			return fmt.Errorf("digest user %q contains ':', which ZooKeeper's digest scheme takes as the end of the name", user)
		case password == "":
			return fmt.Errorf("digest user %q without a password", user)
		}
		c.user, c.password = user, password
		return nil
	}
}

// WithTLS makes the client reach the servers over TLS with cfg — a
// server's secureClientPort, which ZooKeeper serves with Netty — and
// verify their certificates. cfg.ServerName, if empty, is the host
// dialled. Dial gives up early when every attempt ends with a server
// certificate that does not verify or a TLS alert from the server (a
// client certificate it wants or refuses).
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) error {
		if cfg == nil {
			return errors.New("nil TLS configuration")
		}
		c.tls = cfg
		return nil
	}
}

// WithLogger sends the ZooKeeper client's log lines to l at debug level.
// Default: discarded.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { c.logger = l; return nil }
}

// errDialTimeout is why Dial gave up after its dial timeout.
var errDialTimeout = errors.New("gave up after the dial timeout")

// Dial connects to the ensemble at servers (host:port each) and waits
// until it has a session, for the dial timeout at most (WithDialTimeout)
// or until ctx is done. With WithDigestAuth it then authenticates, and
// checks the ACL of the root if it exists (see WithDigestAuth).
func Dial(ctx context.Context, servers []string, opts ...Option) (*Backend, error) {
	cfg := config{timeout: DefaultSessionTimeout, dialTimeout: DefaultDialTimeout, root: DefaultRoot}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("zookeeper: %w", err)
		}
	}
	if len(servers) == 0 {
		return nil, errors.New("zookeeper: no servers")
	}
	dctx, cancel := context.WithTimeoutCause(ctx, cfg.dialTimeout, fmt.Errorf("%w %v", errDialTimeout, cfg.dialTimeout))
	defer cancel()
	sessions := make(chan struct{}, 1)
	reapKick := make(chan struct{}, 1)
	tracker := newConnTracker(len(servers), handshakeBound(cfg.timeout, cfg.dialTimeout, len(servers)), cfg.logger)
	conn, _, err := zk.Connect(servers, cfg.timeout,
		zk.WithLogger(zkLogger{cfg.logger, tracker}),
		zk.WithLogInfo(false),
		zk.WithDialer(tracker.dialer(cfg.tls)),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				tracker.connected()
				select {
				case sessions <- struct{}{}:
				default:
				}
				select {
				case reapKick <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zookeeper: connect %s: %w", strings.Join(servers, ","), err)
	}
	b := &Backend{
		conn:    conn,
		tracker: tracker,
		servers: strings.Join(servers, ","),
		root:    cfg.root,
		timeout: cfg.timeout,
		logger:  cfg.logger,
		user:    cfg.user,
		acl:     zk.WorldACL(zk.PermAll),
		holds:   make(map[holdKey]*hold),
		doomed:  make(map[doomed]func()),

		reapKick: reapKick,
		reapStop: make(chan struct{}),
	}
	if conn.State() != zk.StateHasSession {
		select {
		case <-sessions:
		case <-tracker.giveUp:
			conn.Close()
			return nil, noSession(b.servers, cfg.tls, errors.New("TLS refused every attempt"), tracker.lastErr())
		case <-dctx.Done():
			conn.Close()
			return nil, noSession(b.servers, cfg.tls, context.Cause(dctx), tracker.lastErr())
		}
	}
	if cfg.user != "" {
		// The requests that follow the session get a dial timeout of
		// their own: a slow session (a cold server's first TLS
		// handshakes) must not leave them none.
		cancel()
		dctx, cancel = context.WithTimeoutCause(ctx, cfg.dialTimeout, fmt.Errorf("%w %v", errDialTimeout, cfg.dialTimeout))
		defer cancel()
		// The client sends the credentials again after every
		// reconnection, before any other request.
		_, err := call(dctx, func() (struct{}, error) {
			return struct{}{}, conn.AddAuth("digest", []byte(cfg.user+":"+cfg.password))
		})
		if err != nil {
			if dctx.Err() != nil {
				err = context.Cause(dctx)
			}
			conn.Close()
			return nil, fmt.Errorf("zookeeper: authenticate as %q with %s: %w", cfg.user, b.servers, err)
		}
		b.acl = zk.DigestACL(zk.PermAll, cfg.user, cfg.password)
		b.acls = newACLChecker(b.acl[0])
		if err := b.checkRoot(dctx); err != nil {
			if dctx.Err() != nil {
				err = fmt.Errorf("zookeeper: read the ACL of %s: %w", b.root, context.Cause(dctx))
			}
			conn.Close()
			return nil, err
		}
	}
	b.wg.Add(1)
	go b.reap()
	return b, nil
}

// permission wraps err in turnstile.ErrPermission when ZooKeeper refused
// the request for a node's ACL (zk.ErrNoAuth); what names the request.
// Other errors pass unchanged.
func (b *Backend) permission(err error, what string) error {
	if err == nil || !errors.Is(err, zk.ErrNoAuth) || errors.Is(err, turnstile.ErrPermission) {
		return err
	}
	who := "a client without credentials"
	if b.user != "" {
		who = fmt.Sprintf("user %q", b.user)
	}
	return fmt.Errorf("%w: zookeeper: the nodes' ACLs do not let %s %s (they were created with other credentials): %w", turnstile.ErrPermission, who, what, err)
}

// Name implements driver.Namer.
func (b *Backend) Name() string { return "zookeeper " + b.servers }

// SessionTimeout is the session timeout the Backend asked for; see
// GrantedSessionTimeout for the one the servers granted.
func (b *Backend) SessionTimeout() time.Duration { return b.timeout }

// Close stops the TTL timers and closes the session, which makes the
// server delete every node it holds: its locks are released.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.reapStop)
	for k, h := range b.holds {
		h.timer.Stop()
		delete(b.holds, k)
	}
	b.mu.Unlock()
	b.conn.Close()
	b.wg.Wait()
	return nil
}

// live fails fast while the client has no session: requests would wait
// for a reconnection that may never come.
func (b *Backend) live() error {
	if s := b.conn.State(); s != zk.StateHasSession {
		return fmt.Errorf("%w (state %v)", ErrSuspended, s)
	}
	return nil
}

// listing is a directory's children and its stat, read at once.
type listing struct {
	names []string
	stat  *zk.Stat
}

// children lists dir with its stat (the caller checks zk.ErrNoNode).
func (b *Backend) children(ctx context.Context, dir string) (listing, error) {
	return call(ctx, func() (listing, error) {
		names, stat, err := b.conn.Children(dir)
		return listing{names, stat}, err
	})
}

// call runs a blocking ZooKeeper request and stops waiting for it when
// ctx is done. The request itself ends when the server answers or the
// connection is lost or closed.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	return callUndo(ctx, f, nil)
}

// callUndo is call for a request that creates something on the server.
// The request goes on after ctx ends, and may still succeed: then undo
// (unless nil) runs with its result, so that nothing is left behind for
// a caller who has gone — a queue node nobody waits on would hold up
// every waiter behind it for as long as the session lives.
func callUndo[T any](ctx context.Context, f func() (T, error), undo func(T)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	var (
		mu        sync.Mutex
		abandoned bool
	)
	done := make(chan result, 1)
	go func() {
		v, err := f()
		mu.Lock()
		if abandoned {
			mu.Unlock()
			if undo != nil && err == nil {
				undo(v)
			}
			return
		}
		done <- result{v, err}
		mu.Unlock()
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-done: // came as ctx ended: the caller's after all
		return r.v, r.err
	default:
		abandoned = true
		var zero T
		return zero, ctx.Err()
	}
}

// Dir is the znode under which key's queue lives: the root, then the key
// with bytes outside [A-Za-z0-9_:-] escaped as %XX. Its children are named
// <escaped owner>-<10-digit sequence>; the lowest sequence holds the lock.
func (b *Backend) Dir(key string) string { return b.dir(key) }

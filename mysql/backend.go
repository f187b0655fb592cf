package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/sqlkinds"
)

var (
	//go:embed sql/schema.sql
	sqlSchema string
	//go:embed sql/take.sql
	sqlTake string
	//go:embed sql/release_lock.sql
	sqlReleaseLock string
	//go:embed sql/acquire.sql
	sqlAcquire string
	//go:embed sql/extend.sql
	sqlExtend string
	//go:embed sql/release.sql
	sqlRelease string
)

// maxNameLen is GET_LOCK's limit on names, in characters.
const maxNameLen = 64

var (
	_ driver.Backend     = (*Backend)(nil)
	_ driver.Namer       = (*Backend)(nil)
	_ driver.Reentranter = (*Backend)(nil) // kinds.go
	_ driver.Semaphorer  = (*Backend)(nil)
	_ driver.ReadWriter  = (*Backend)(nil)
)

// kinds is the lock kinds of the SQL stores (internal/sqlkinds).
type kinds = sqlkinds.Views

// Backend holds locks on a MySQL or MariaDB server over a fixed set of
// pinned connections. Create it with Dial; Close it when done.
type Backend struct {
	db     *sql.DB
	name   string
	seed   maphash.Seed
	shards []shard

	stop      chan struct{}
	swept     chan struct{}
	closeOnce sync.Once

	kindsMu    sync.Mutex
	kindsReady bool // turnstile_holds exists: the lock kinds' table (kinds.go)

	// The tenant's database and salt, which name its user locks
	// (tenant.go).
	tenant string
	salt   [8]byte

	// kinds gives the Backend its ReentrantView, SemaphoreView and
	// ReadWriteView (the views of turnstile.Reentrant, Semaphore and
	// ReadWrite; kinds.go), as it gives them to a postgres Backend.
	// docs/backends.md says what each kind promises on the SQL stores;
	// there is no fair view, since the store keeps no queue of waiters.
	kinds
}

// Dial connects to the server cfg names, creates the table
// turnstile_locks if it is missing, and returns a Backend that pins at
// most WithConns connections. Dial sets cfg.InterpolateParams, so that
// every statement is one round trip.
func Dial(ctx context.Context, cfg *gomysql.Config, opts ...Option) (*Backend, error) {
	c := defaultConfig()
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	cfg = cfg.Clone()
	cfg.InterpolateParams = true
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	// The pinned connections are all the Backend uses; set-up borrows one
	// of them before any is pinned.
	db.SetMaxOpenConns(c.conns)
	db.SetMaxIdleConns(c.conns)
	b := &Backend{
		db:     db,
		name:   "mysql " + cfg.Addr + "/" + cfg.DBName,
		seed:   maphash.MakeSeed(),
		shards: make([]shard, c.conns),
		stop:   make(chan struct{}),
		swept:  make(chan struct{}),
	}
	b.kinds = func(s sqlkinds.Spec) driver.Backend { s.Store = b.name; return &kindView{b, s} }
	if err := b.setUp(ctx, cfg); err != nil {
		_ = db.Close()
		return nil, err
	}
	for i := range b.shards {
		b.shards[i] = shard{db: db, held: make(map[string]hold)}
	}
	go b.sweep()
	return b, nil
}

// setUp connects, creates turnstile_locks if it is missing and reads the
// tenant.
func (b *Backend) setUp(ctx context.Context, cfg *gomysql.Config) error {
	c, err := b.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysql: could not connect to the server at %s: %w", cfg.Addr, permission(loginHint(err, cfg)))
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, sqlSchema); err != nil {
		return fmt.Errorf("%s: create table turnstile_locks: %w", b.name, permission(err))
	}
	if err := b.loadTenant(ctx, c); err != nil {
		return fmt.Errorf("%s: read the tenant's salt: %w", b.name, permission(err))
	}
	return nil
}

// Name implements driver.Namer: "mysql host:port/db".
func (b *Backend) Name() string { return b.name }

// HoldsTTL implements driver.TTLHolder: the row's expires_at, which
// Acquire checks whether or not the holder's session and its user lock
// live on, is the TTL of its last Acquire or Extend by the server's
// clock. The lock kinds' views do not offer it.
func (b *Backend) HoldsTTL() bool { return true }

// LockName is the name of key's row in turnstile_locks (and
// turnstile_holds): the key itself if it has at most 64 bytes and does
// not start with "ts:"; else "ts:" and 61 hex digits of its SHA-256. A
// hashed name starts with "ts:" and a key kept as its name does not, so
// no key's name is another key's. The user lock's name is another,
// of the tenant (userLock).
func LockName(key string) string {
	if len(key) <= maxNameLen && !strings.HasPrefix(key, hashedPrefix) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return (hashedPrefix + hex.EncodeToString(sum[:]))[:maxNameLen]
}

// hashedPrefix starts the names of keys stored under a hash.
const hashedPrefix = "ts:"

func (b *Backend) shard(name string) *shard {
	return &b.shards[maphash.String(b.seed, name)%uint64(len(b.shards))]
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := b.checkKey(key); err != nil {
		return 0, false, err
	}
	r := b.ref(key)
	ctx, s, done := b.lockShard(ctx, r.name)
	defer done()
	return s.acquire(ctx, r, owner, ttl)
}

// Extend implements driver.Backend.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	name := LockName(key)
	ctx, s, done := b.lockShard(ctx, name)
	defer done()
	return s.extend(ctx, name, owner, ttl)
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	name := LockName(key)
	ctx, s, done := b.lockShard(ctx, name)
	defer done()
	return s.release(ctx, name, owner)
}

// sweep releases locks whose TTL passed without Extend, so that a live
// process does not keep them from others for ever.
func (b *Backend) sweep() {
	defer close(b.swept)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		for i := range b.shards {
			b.shards[i].expire(b.stop)
		}
	}
}

// Close releases every lock of the Backend and closes its connections.
func (b *Backend) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.stop)
		<-b.swept
		for i := range b.shards {
			s := &b.shards[i]
			s.mu.Lock()
			s.discard() // closing the session frees its locks on the server
			s.mu.Unlock()
		}
		err = b.db.Close()
	})
	return err
}

// statementContext keeps neither ctx's cancellation nor a deadline
// shorter than statementFloor: the driver closes a connection whose
// statement's context ends, and with it the session's locks of every
// owner on the shard — one caller's short deadline would take the other
// holders' locks. A longer deadline still bounds a statement, and so
// does statementFloor, since a store that slow is as good as lost. A
// caller whose deadline passed meanwhile gets the statement's outcome a
// little late.
func statementContext(ctx context.Context) (context.Context, context.CancelFunc) {
	detached := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		if floor := time.Now().Add(statementFloor); dl.Before(floor) {
			dl = floor
		}
		return context.WithDeadline(detached, dl)
	}
	return context.WithTimeout(detached, statementTimeout)
}

// isConnErr reports whether err leaves the connection's session in doubt:
// anything but an error the server reported.
func isConnErr(err error) bool {
	var me *gomysql.MySQLError
	return !errors.As(err, &me)
}

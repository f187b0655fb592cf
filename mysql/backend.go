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
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile/driver"
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
	_ driver.Backend = (*Backend)(nil)
	_ driver.Namer   = (*Backend)(nil)
)

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
	if _, err := db.ExecContext(ctx, sqlSchema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("mysql: create table turnstile_locks: %w", permission(loginHint(err, cfg)))
	}
	b := &Backend{
		db:     db,
		name:   "mysql " + cfg.Addr + "/" + cfg.DBName,
		seed:   maphash.MakeSeed(),
		shards: make([]shard, c.conns),
		stop:   make(chan struct{}),
		swept:  make(chan struct{}),
	}
	for i := range b.shards {
		b.shards[i] = shard{db: db, held: make(map[string]hold)}
	}
	go b.sweep()
	return b, nil
}

// Name implements driver.Namer: "mysql host:port/db".
func (b *Backend) Name() string { return b.name }

// LockName is the name under which key is locked: the GET_LOCK name and
// the key of its row in turnstile_locks. Keys of at most 64 bytes are
// their own name; longer ones become "ts:" and 61 hex digits of their
// SHA-256.
func LockName(key string) string {
	if len(key) <= maxNameLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return ("ts:" + hex.EncodeToString(sum[:]))[:maxNameLen]
}

func (b *Backend) shard(name string) *shard {
	return &b.shards[maphash.String(b.seed, name)%uint64(len(b.shards))]
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	name := LockName(key)
	s := b.shard(name)
	ctx, cancel := statementContext(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquire(ctx, name, owner, ttl)
}

// Extend implements driver.Backend.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	name := LockName(key)
	s := b.shard(name)
	ctx, cancel := statementContext(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.extend(ctx, name, owner, ttl)
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	name := LockName(key)
	s := b.shard(name)
	ctx, cancel := statementContext(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
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

// statementContext keeps ctx's deadline but not its cancellation: the
// driver closes a connection whose statement is cancelled, and with it the
// session's locks of every owner on the shard. A deadline still bounds a
// statement, since a store that slow is as good as lost.
func statementContext(ctx context.Context) (context.Context, context.CancelFunc) {
	detached := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
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

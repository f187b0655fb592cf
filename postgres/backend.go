package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var (
	//go:embed schema.sql
	schemaSQL string
	//go:embed extend.sql
	extendSQL string
)

const (
	acquireSQL = "SELECT tok, other FROM turnstile_lock_acquire($1, $2, $3, $4, $5)"
	releaseSQL = "SELECT turnstile_release($1, $2, $3, $4)"
	// The lease ran out locally; the row has expired too, or does within
	// moments, so waiters may try again.
	expireSQL = "SELECT pg_advisory_unlock($1), pg_notify('turnstile_released', $2)"
)

// errClosed is returned by operations on a closed Backend.
var errClosed = fmt.Errorf("postgres: %w", turnstile.ErrClosed)

// Backend is a lock store on one PostgreSQL database. The zero value is
// not usable; call Dial.
type Backend struct {
	cfg     config
	connCfg *pgx.ConnConfig
	name    string
	shards  []*shard
	listen  listener
	// lockID is the advisory lock id of a key in the Backend's tenant
	// (tenant.go).
	lockID func(key string) int64

	closeOnce sync.Once
}

var (
	_ driver.Backend = (*Backend)(nil)
	_ driver.Namer   = (*Backend)(nil)
)

// Dial connects to the database that connCfg names, creates tables
// turnstile_locks and turnstile_holds (the lock kinds' holders) and their
// functions if they are missing, and returns a
// Backend that holds locks on at most WithConns connections.
func Dial(ctx context.Context, connCfg *pgx.ConnConfig, opts ...Option) (*Backend, error) {
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	connCfg = connCfg.Copy()
	if connCfg.RuntimeParams == nil {
		connCfg.RuntimeParams = map[string]string{}
	}
	if _, ok := connCfg.RuntimeParams["application_name"]; !ok {
		connCfg.RuntimeParams["application_name"] = "turnstile"
	}
	// Let the server notice a vanished client in about 25 s and free its
	// advisory locks, instead of after the kernel default of two hours.
	for k, v := range map[string]string{"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"} {
		if _, ok := connCfg.RuntimeParams[k]; !ok {
			connCfg.RuntimeParams[k] = v
		}
	}
	b := &Backend{
		cfg:     cfg,
		connCfg: connCfg,
		name:    "postgres " + net.JoinHostPort(connCfg.Host, strconv.Itoa(int(connCfg.Port))) + "/" + connCfg.Database,
		shards:  make([]*shard, cfg.conns),
	}
	for i := range b.shards {
		b.shards[i] = &shard{b: b, sem: make(chan struct{}, 1), held: map[string]*hold{}}
	}
	s := b.shards[0]
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	conn, qctx, cancel, err := s.session()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.name, permission(err))
	}
	defer cancel()
	if b.lockID, err = setUp(qctx, conn); err != nil {
		s.drop()
		return nil, fmt.Errorf("%s: %w", b.name, err)
	}
	return b, nil
}

// Name implements driver.Namer: "postgres host:port/db".
func (b *Backend) Name() string { return b.name }

// Close closes the lock connections. The server frees their advisory
// locks; rows of locks still held stay until their TTL runs out.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.listen.close()
		for _, s := range b.shards {
			s.sem <- struct{}{}
			s.drop()
			s.conn = nil
			s.held = nil // marks the shard closed
			<-s.sem
		}
	})
	return nil
}

func (b *Backend) shard(hash int64) *shard {
	return b.shards[uint64(hash)%uint64(len(b.shards))]
}

// enter waits for the shard of hash.
func (b *Backend) enter(ctx context.Context, hash int64) (*shard, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := b.shard(hash)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	if s.held == nil {
		s.unlock()
		return nil, errClosed
	}
	return s, nil
}

// open enters the shard of hash and opens its session: conn and qctx
// serve the call's queries, and done ends them and leaves the shard.
func (b *Backend) open(ctx context.Context, hash int64) (s *shard, conn *pgx.Conn, qctx context.Context, done func(), err error) {
	if s, err = b.enter(ctx, hash); err != nil {
		return nil, nil, nil, nil, err
	}
	conn, qctx, cancel, err := s.session()
	if err != nil {
		s.unlock()
		return nil, nil, nil, nil, fmt.Errorf("%s: %w", b.name, permission(err))
	}
	return s, conn, qctx, func() {
		cancel()
		s.unlock()
	}, nil
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if err := b.checkKey(key); err != nil {
		return 0, false, err
	}
	hash := b.lockID(key)
	s, err := b.enter(ctx, hash)
	if err != nil {
		return 0, false, err
	}
	defer s.unlock()
	start := time.Now()
	h := s.held[key]
	if h != nil && h.gen != s.gen {
		h.timer.Stop()
		delete(s.held, key)
		h = nil
	}
	if h != nil && h.owner != owner && start.Before(h.deadline) {
		return 0, false, nil // another owner of this Backend holds it
	}
	conn, qctx, cancel, err := s.session()
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", b.name, permission(err))
	}
	defer cancel()
	if h != nil && h.gen != s.gen { // session() dialled anew
		h = nil
	}
	var (
		tok   *int64
		other *string
	)
	if err := conn.QueryRow(qctx, acquireSQL, key, hash, owner, ttl.Milliseconds(), h != nil).Scan(&tok, &other); err != nil {
		s.failed()
		return 0, false, fmt.Errorf("%s: acquire: %w", b.name, permission(err))
	}
	if other != nil {
		return 0, false, fmt.Errorf("%s: acquire %q: %w: key %q has the same id and is held through another Backend; two Backends cannot hold the two keys at once", b.name, key, ErrLockIDCollision, *other)
	}
	if tok == nil {
		return 0, false, nil
	}
	if h == nil {
		h = &hold{hash: hash, gen: s.gen}
		s.held[key] = h
	}
	h.owner = owner
	h.deadline = start.Add(ttl)
	s.arm(key, h, ttl)
	return uint64(*tok), true, nil
}

// Extend implements driver.Backend. It also proves that the session that
// holds the advisory lock is alive.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	hash := b.lockID(key)
	s, err := b.enter(ctx, hash)
	if err != nil {
		return false, err
	}
	defer s.unlock()
	start := time.Now()
	h := s.held[key]
	if h == nil || h.owner != owner || h.gen != s.gen || !start.Before(h.deadline) {
		return false, nil
	}
	conn, qctx, cancel, err := s.session()
	if err != nil {
		return false, fmt.Errorf("%s: %w", b.name, permission(err))
	}
	defer cancel()
	if h.gen != s.gen {
		return false, nil // the session died while dialling anew
	}
	tag, err := conn.Exec(qctx, extendSQL, key, owner, ttl.Milliseconds())
	if err != nil {
		s.failed()
		return false, fmt.Errorf("%s: extend: %w", b.name, permission(err))
	}
	if tag.RowsAffected() == 0 {
		// Removed behind our back (a forced release, or the row expired
		// on the server's clock): let others have the advisory lock too,
		// and tell waiters that it went.
		h.timer.Stop()
		delete(s.held, key)
		if _, err := conn.Exec(qctx, expireSQL, hash, key); err != nil {
			s.failed()
		}
		return false, nil
	}
	h.deadline = start.Add(ttl)
	s.arm(key, h, ttl)
	return true, nil
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	hash := b.lockID(key)
	s, err := b.enter(ctx, hash)
	if err != nil {
		return false, err
	}
	defer s.unlock()
	h := s.held[key]
	if h == nil || h.owner != owner {
		return false, nil
	}
	h.timer.Stop()
	delete(s.held, key)
	live := h.gen == s.gen
	conn, qctx, cancel, err := s.session()
	if err != nil {
		return false, fmt.Errorf("%s: %w", b.name, permission(err))
	}
	defer cancel()
	// A hold of a dead session has no advisory lock left, but its row may
	// still be owner's: free that.
	var held bool
	if err := conn.QueryRow(qctx, releaseSQL, key, hash, owner, live && h.gen == s.gen).Scan(&held); err != nil {
		s.failed()
		return false, fmt.Errorf("%s: release: %w", b.name, permission(err))
	}
	return held, nil
}

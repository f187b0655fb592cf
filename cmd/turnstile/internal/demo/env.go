//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	tsredis "github.com/turnstilelock/turnstile/redis"
)

// poolSize is the most PostgreSQL connections one demo process opens.
const poolSize = 16

// redisVar and postgresVar pass the servers' URLs to the demo's
// worker processes in their environment: a command line is visible to
// every local user.
const (
	redisVar    = "TURNSTILE_DEMO_REDIS"
	postgresVar = "TURNSTILE_DEMO_POSTGRES"
)

// environment is what every scenario runs on: a Redis server, and a PostgreSQL
// server when one is installed or given.
type environment struct {
	stderr   io.Writer
	redisURL string
	pgURL    string // empty: no PostgreSQL, scenarios use Redis
	// flashUnits and flashOrders size the flash sale.
	flashUnits  int64
	flashOrders int
	// herdWaiters sizes the herd.
	herdWaiters int
	// outageTTL and outagePhase time redlock-outage; inProcess is
	// --in-process.
	outageTTL   time.Duration
	outagePhase time.Duration
	inProcess   bool
	notes       []string

	rc   rueidis.Client
	pool *pgxpool.Pool

	// clientOptions are given to every turnstile Client the demo process
	// itself makes (not its workers'), for example an observer.
	clientOptions []turnstile.Option

	mu      sync.Mutex // serialises progress lines
	closers []func()   // run in reverse order by Close
}

// startEnv starts or connects to the servers the options ask for.
func startEnv(ctx context.Context, o *options, stderr io.Writer) (env *environment, err error) {
	env = &environment{stderr: stderr, redisURL: o.redisURL, pgURL: o.pgURL, flashUnits: o.units, flashOrders: o.orders, herdWaiters: o.waiters, outageTTL: o.outageTTL, outagePhase: o.outagePhase, inProcess: o.inProcess}
	defer func() {
		if err != nil {
			env.Close()
			env = nil
		}
	}()

	// PostgreSQL takes a few seconds to initialise: start it while Redis
	// starts.
	type pgStarted struct {
		srv *pgproc.Server
		err error
	}
	var pgc chan pgStarted
	if o.pgURL == "" && !o.inProcess {
		env.progress("starting postgres on a free loopback port...")
		pgc = make(chan pgStarted, 1)
		go func() { s, err := pgproc.Start(); pgc <- pgStarted{s, err} }()
		// Whatever happens next, a server that started is stopped.
		defer func() {
			if pgc != nil {
				if r := <-pgc; r.srv != nil {
					r.srv.Kill()
				}
			}
		}()
	}

	switch {
	case o.redisURL != "":
		env.notes = append(env.notes, "redis: "+redact.URL(o.redisURL)+" (given with "+o.redisFrom+")")
	case !o.inProcess && redisproc.Available():
		dir, err := os.MkdirTemp("", "turnstile-demo-redis-")
		if err != nil {
			return env, err
		}
		env.closers = append(env.closers, func() { _ = os.RemoveAll(dir) })
		env.progress("starting redis-server on a free loopback port...")
		srv, err := redisproc.Start(dir)
		if err != nil {
			return env, err
		}
		env.closers = append(env.closers, srv.Kill)
		env.redisURL = srv.URL()
		version := "?"
		if info, err := srv.Do("INFO", "server"); err == nil {
			version = infoField(info, "redis_version")
		}
		env.notes = append(env.notes, fmt.Sprintf("redis: redis-server %s on %s (started for this demo)", version, srv.Addr()))
	default:
		m := miniredis.NewMiniRedis()
		// Keys expire as the wall clock moves, as on a real server: lock
		// TTLs are what several scenarios are about.
		m.ClockTTL(true)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return env, fmt.Errorf("start in-process redis: %w", err)
		}
		env.closers = append(env.closers, m.Close)
		// RESP2: under RESP3 rueidis shares one connection between
		// commands and the backend's release subscriptions, and miniredis
		// refuses every command on a connection that has subscribed.
		env.redisURL = "redis://" + m.Addr() + "?protocol=2"
		why := "redis-server is not installed; install it with: " + redisproc.InstallHint
		if o.inProcess {
			why = "as --in-process asks"
		}
		env.notes = append(env.notes, fmt.Sprintf("redis: in-process (miniredis) on %s, %s", m.Addr(), why))
	}
	if env.rc, err = dialRedis(env.redisURL); err != nil {
		return env, err
	}

	startedPG := "" // address of the PostgreSQL server started here
	switch {
	case o.pgURL != "":
		env.notes = append(env.notes, "postgres: "+redact.URL(o.pgURL)+" (given with "+o.pgFrom+")")
	case o.inProcess:
		env.notes = append(env.notes, "postgres: none (--in-process); the scenarios use Redis instead")
	default:
		var r pgStarted
		select {
		case r = <-pgc:
			pgc = nil
		case <-ctx.Done():
			return env, ctx.Err()
		}
		switch {
		case errors.Is(r.err, pgproc.ErrNotInstalled):
			env.notes = append(env.notes, "postgres: not installed, so the scenarios use Redis instead; install it with: "+pgproc.InstallHint)
		case r.err != nil:
			env.notes = append(env.notes, fmt.Sprintf("postgres: could not be started (%v); the scenarios use Redis instead", r.err))
		default:
			env.closers = append(env.closers, r.srv.Kill)
			env.pgURL = r.srv.URL()
			startedPG = r.srv.Addr()
		}
	}
	if env.pgURL != "" {
		if env.pool, err = dialPostgres(ctx, env.pgURL); err != nil {
			return env, err
		}
		var version string
		if err := env.pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
			return env, fmt.Errorf("postgres: %w", err)
		}
		if startedPG != "" {
			env.notes = append(env.notes, fmt.Sprintf("postgres: PostgreSQL %s on %s (started for this demo)", strings.Fields(version)[0], startedPG))
		}
	}
	for _, n := range env.notes {
		env.progress("%s", n)
	}
	return env, nil
}

// connectEnv connects a worker process to the servers its parent
// started.
func connectEnv(ctx context.Context, redisURL, pgURL string, stderr io.Writer) (env *environment, err error) {
	env = &environment{stderr: stderr, redisURL: redisURL, pgURL: pgURL}
	if env.rc, err = dialRedis(redisURL); err != nil {
		return nil, err
	}
	if pgURL != "" {
		if env.pool, err = dialPostgres(ctx, pgURL); err != nil {
			env.Close()
			return nil, err
		}
	}
	return env, nil
}

func dialRedis(rawURL string) (rueidis.Client, error) {
	// Read as turnstile.Open reads it: TLS and password_file included.
	opt, _, err := tsredis.ParseURL(rawURL)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("redis %s: %w", redact.URL(rawURL), err), rawURL)
	}
	// The scenarios read what other processes just wrote: no client-side
	// cache.
	opt.DisableCache = true
	opt.Dialer.Timeout = 5 * time.Second
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("redis %s: %w", redact.URL(rawURL), err), rawURL)
	}
	return rc, nil
}

func dialPostgres(ctx context.Context, rawURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("postgres %s: %w", redact.URL(rawURL), err), rawURL)
	}
	cfg.MaxConns = poolSize
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, cfg)
	if err == nil {
		err = pool.Ping(cctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, redact.Error(fmt.Errorf("postgres %s: %w", redact.URL(rawURL), err), rawURL)
	}
	return pool, nil
}

// newClient returns a turnstile Client on the demo's Redis, with its own
// connection, as a separate service instance would have.
func (e *environment) newClient(opts ...turnstile.Option) (*turnstile.Client, error) {
	b, err := tsredis.New(e.rc)
	if err != nil {
		return nil, err
	}
	return turnstile.New(b, append(slices.Clone(e.clientOptions), opts...)...)
}

// store names where the scenarios' data lives.
func (e *environment) store() string {
	if e.pool != nil {
		return "postgres"
	}
	return "redis"
}

// describe says which servers the demo runs on.
func (e *environment) describe() string { return strings.Join(e.notes, "\n") }

// progress writes one line about the run to stderr.
func (e *environment) progress(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.stderr, "demo: "+format+"\n", args...)
}

// Close disconnects and stops every server the demo started.
func (e *environment) Close() {
	if e.pool != nil {
		e.pool.Close()
	}
	if e.rc != nil {
		e.rc.Close()
	}
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}

// infoField returns a field of an INFO reply.
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}

package testserver

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// A MainOption adds to what Main does around a package's tests.
type MainOption func(*mainConfig)

type mainConfig struct {
	start  []func() (stop func(), err error)
	before func() error
	ignore []goleak.Option
}

// Shared starts a server the whole package shares before its tests (in
// the order given), and stops it after them with the stop function that
// start returned.
func Shared(start func() (stop func(), err error)) MainOption {
	return func(c *mainConfig) { c.start = append(c.start, start) }
}

// SharedPostgres starts one PostgreSQL server for the whole package
// (initdb costs a second or two) and puts it in *pg.
func SharedPostgres(pg **Postgres) MainOption {
	return Shared(func() (func(), error) {
		s, err := pgproc.Start()
		if err != nil {
			return nil, err
		}
		*pg = &Postgres{Server: s}
		return s.Kill, nil
	})
}

// SharedRedis starts one redis-server for the whole package and puts it
// in *r.
func SharedRedis(r **redisproc.Server) MainOption {
	return sharedIn("", "turnstile-redis-", r, redisproc.Start, (*redisproc.Server).Kill)
}

// SharedMySQL starts one MariaDB server for the whole package, in memory
// where /dev/shm exists, and puts it in *m.
func SharedMySQL(m **mysqlproc.Server) MainOption {
	return sharedIn("/dev/shm", "turnstile-mysql-", m, mysqlproc.Start, func(s *mysqlproc.Server) { s.Kill(); s.Remove() })
}

// sharedIn is Shared for a server that start starts with its files in a
// temporary directory of their own, made under parent (or the system's
// temporary directory, if parent is "" or cannot hold one) and removed
// once stop has stopped the server, or once it failed to start. It puts
// the server in *into.
func sharedIn[S any](parent, prefix string, into *S, start func(dir string) (S, error), stop func(S)) MainOption {
	return Shared(func() (func(), error) {
		dir, err := os.MkdirTemp(parent, prefix)
		if err != nil && parent != "" {
			dir, err = os.MkdirTemp("", prefix)
		}
		if err != nil {
			return nil, err
		}
		s, err := start(dir)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		*into = s
		return func() { stop(s); _ = os.RemoveAll(dir) }, nil
	})
}

// Before runs f after the shared servers started and before the tests;
// an error fails the package.
func Before(f func() error) MainOption {
	return func(c *mainConfig) { c.before = f }
}

// IgnoreGoroutines names goroutines that may outlive the tests (a
// client library's background work that nothing can stop).
func IgnoreGoroutines(opts ...goleak.Option) MainOption {
	return func(c *mainConfig) { c.ignore = append(c.ignore, opts...) }
}

// IgnoreRueidisRefresh is the goroutine rueidis leaves behind when a dial
// fails or a connection breaks: a cluster-topology refresh that sleeps up
// to a second and then ends, with no client to close that could stop it.
var IgnoreRueidisRefresh = goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")

// Main runs a test package's tests and exits: it starts the servers the
// package shares, runs the tests, stops the servers, and then — once they
// are gone, so that their watchers have ended — fails the package if a
// goroutine outlived the tests. Packages whose tests re-execute the test
// binary as a child process dispatch the child before calling Main.
func Main(m *testing.M, opts ...MainOption) {
	var c mainConfig
	for _, o := range opts {
		o(&c)
	}
	os.Exit(c.run(m))
}

func (c *mainConfig) run(m *testing.M) int {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		stops = nil
	}
	defer stopAll()
	for _, start := range c.start {
		stop, err := start()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		stops = append(stops, stop)
	}
	if c.before != nil {
		if err := c.before(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	code := m.Run()
	stopAll()
	if code == 0 {
		if err := goleak.Find(c.ignore...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// Ctx returns a context that ends after d, or when the test ends.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// MustDo runs a command on the server and fails the test on error.
func (r *Redis) MustDo(t testing.TB, args ...string) string {
	t.Helper()
	reply, err := r.Do(args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return reply
}

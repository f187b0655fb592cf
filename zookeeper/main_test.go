package zookeeper_test

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/internal/zkproc"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/zookeeper"
)

// sessionTimeout is short so that a killed holder's session, and its
// locks, end within a couple of seconds.
const sessionTimeout = 2 * time.Second

// srv is the one ZooKeeper server of this package: the JVM takes a while
// to start.
var srv *zkproc.Server

func TestMain(m *testing.M) {
	locktest.RunChild()
	testserver.Main(m, testserver.Shared(func() (func(), error) {
		dir, err := os.MkdirTemp("", "turnstile-zk-")
		if err != nil {
			return nil, err
		}
		if srv, err = zkproc.Start(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		return func() { srv.Kill(); os.RemoveAll(dir) }, nil
	}))
}

// serverURL names the server without a session timeout: turnstile.Open
// makes it the Client's TTL (at least 2 s), so the multi-process cases'
// children, which open it with TTLs from 500 ms to a minute, each get a
// session that agrees with their leases.
func serverURL() string {
	return "zookeeper://" + srv.Addr()
}

// longSession is the session of dial's backends: the longest the
// server grants, so that it covers the TTLs of the tests' leases (a
// Backend refuses a lease its session does not cover). A backend that
// closes ends its session, and its locks, at once.
const longSession = 600 * zkproc.TickTime

// dial returns a backend with a session of its own, closed when the test
// ends.
func dial(t testing.TB, opts ...zookeeper.Option) *zookeeper.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := zookeeper.Dial(ctx, []string{srv.Addr()}, append([]zookeeper.Option{zookeeper.WithSessionTimeout(longSession)}, opts...)...)
	if err != nil {
		t.Fatalf("zookeeper.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// rawConn is a plain ZooKeeper client of the test's own, as an operator
// would use.
func rawConn(t testing.TB) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{srv.Addr()}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// queue lists the node names in dir, first in line first.
func queue(t testing.TB, c *zk.Conn, dir string) []string {
	t.Helper()
	names, _, err := c.Children(dir)
	if err == zk.ErrNoNode {
		return nil
	}
	if err != nil {
		t.Fatalf("children of %s: %v", dir, err)
	}
	sort.Slice(names, func(i, j int) bool { return names[i][len(names[i])-10:] < names[j][len(names[j])-10:] })
	return names
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// startServer starts a server of the test's own, for tests that stop it.
func startServer(t testing.TB) *zkproc.Server {
	t.Helper()
	s, err := zkproc.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

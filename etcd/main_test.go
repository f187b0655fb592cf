package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestMain(m *testing.M) {
	locktest.RunChild()
	testserver.Main(m)
}

// dial returns a backend with a client of its own, closed when the test
// ends.
func dial(t testing.TB, srv *testserver.Etcd, opts ...etcd.Option) *etcd.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := etcd.Dial(ctx, clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second}, opts...)
	if err != nil {
		t.Fatalf("etcd.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// rawClient returns an etcd client of the test's own, closed when it ends.
func rawClient(t testing.TB, srv *testserver.Etcd) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockKey is the documented etcd key of the lock on key (default prefix).
func lockKey(key string) string { return etcd.DefaultPrefix + "locks/" + key }

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// startBackend starts a server for the test and returns it with a
// backend dialled to it.
func startBackend(t testing.TB) (*testserver.Etcd, *etcd.Backend) {
	t.Helper()
	srv := testserver.StartEtcd(t)
	return srv, dial(t, srv)
}

// startOwn starts a server of the test's own, killed when the test ends,
// and returns it with a backend dialled to it, which the test closes.
func startOwn(t *testing.T, ctx context.Context) (*etcdproc.Server, *etcd.Backend) {
	t.Helper()
	srv, err := etcdproc.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	b, err := etcd.Dial(ctx, clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return srv, b
}

// grant grants a lease of 30 s through b's client.
func grant(t *testing.T, ctx context.Context, b *etcd.Backend) clientv3.LeaseID {
	t.Helper()
	lease, err := b.Client().Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	return lease.ID
}

package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestAuthBurst queues 200 waiters through one Client on an etcd with
// authentication on while a holder renews its lock. etcd checks every
// login's password with bcrypt, which costs it milliseconds of CPU, so a
// client that logs in again per waiter or per renewal saturates etcd in
// a burst: the holder's renewal then waits behind the logins and misses
// its deadline. The Client must log in a few times in all, not once per
// waiter or renewal (counted on etcd, from its metrics), the holder must
// keep its lock, and every waiter must get the lock in turn.
func TestAuthBurst(t *testing.T) {
	const (
		rootPW  = "burst-root-pw"
		userPW  = "burst-user-pw"
		waiters = 200
		ttl     = 6 * time.Second // renewed every 2 s, by the holder and each waiter
		key     = "burst-key"
	)
	srv := testserver.StartEtcd(t)
	if err := srv.EnableAuth(rootPW, etcdproc.User{Name: "turnstile", Password: userPW, Prefix: etcd.DefaultPrefix}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 4*time.Minute)
	watcher, err := clientv3.New(clientv3.Config{
		Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: "root", Password: rootPW,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	queued := func() int {
		dir := etcd.DefaultPrefix + "queue/" + key + "/"
		r, err := watcher.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("count the waiters: %v", err)
		}
		return int(r.Count)
	}
	before := authCalls(t, srv)

	c, err := turnstile.Open(ctx, fmt.Sprintf("etcd://turnstile:%s@%s", userPW, srv.Addr()), turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	holder, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	unbounded := turnstile.WithBackoff(turnstile.Exponential{Base: 10 * time.Millisecond, Cap: time.Second, MaxRetries: -1})
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			l, err := c.Acquire(ctx, key, unbounded)
			if err == nil {
				err = l.Release(context.WithoutCancel(ctx))
			}
			errs <- err
		})
	}
	for queued() < waiters {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d waiters queued: %v", queued(), waiters, ctx.Err())
		case <-holder.Context().Done():
			t.Fatalf("the holder lost its lock while the waiters queued (%d logins so far): %v", authCalls(t, srv)-before, context.Cause(holder.Context()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Hold through several renewals of the holder and of every waiter.
	select {
	case <-holder.Context().Done():
		t.Fatalf("the holder lost its lock with %d waiters queued (%d logins so far): %v", waiters, authCalls(t, srv)-before, context.Cause(holder.Context()))
	case <-time.After(2*ttl + time.Second):
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("holder's Release: %v", err)
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed == 0 {
				t.Errorf("a waiter: %v", err)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d waiters failed", failed, waiters)
	}

	logins := authCalls(t, srv) - before
	t.Logf("%d waiters and a holder renewing for %v: %d logins (Authenticate calls on etcd)", waiters, 2*ttl+time.Second, logins)
	// One at Open, one per stream the client opens (lease renewals,
	// watches), and a few spare for streams that etcd or gRPC may close
	// and the client opens again.
	if logins > 10 {
		t.Fatalf("%d logins for one Client: want a few, not one per waiter or renewal", logins)
	}
}

// authCalls is how many logins etcd has answered.
func authCalls(t *testing.T, srv *testserver.Etcd) int {
	t.Helper()
	n, err := srv.GRPCCalls("Authenticate")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAuthWaitsApart: waits that do not overlap — each queues behind a
// holder, which then releases — log in no more often than a burst
// does: neither the renewals nor the watches of a wait open a stream
// (and log in) of their own.
func TestAuthWaitsApart(t *testing.T) {
	const (
		rootPW = "apart-root-pw"
		userPW = "apart-user-pw"
		waits  = 10
	)
	srv := testserver.StartEtcd(t)
	if err := srv.EnableAuth(rootPW, etcdproc.User{Name: "turnstile", Password: userPW, Prefix: etcd.DefaultPrefix}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 2*time.Minute)
	before := authCalls(t, srv)
	c, err := turnstile.Open(ctx, fmt.Sprintf("etcd://turnstile:%s@%s", userPW, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range waits {
		holder, err := c.Acquire(ctx, "apart-key")
		if err != nil {
			t.Fatal(err)
		}
		released := make(chan error, 1)
		go func() {
			time.Sleep(200 * time.Millisecond) // long enough for the waiter to queue, mostly
			released <- holder.Release(ctx)
		}()
		l, err := c.Acquire(ctx, "apart-key")
		if err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	logins := authCalls(t, srv) - before
	t.Logf("%d waits one after another: %d logins", waits, logins)
	if logins > 5 {
		t.Fatalf("%d logins for %d waits one after another through one Client: want a few, not one or more per wait", logins, waits)
	}
}

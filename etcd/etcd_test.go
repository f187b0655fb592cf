package etcd_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/badurl"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// queueDir is the documented etcd directory of key's waiters.
func queueDir(key string) string { return etcd.DefaultPrefix + "queue/" + url.PathEscape(key) + "/" }

// waitQueued waits until key's queue holds n waiters.
func waitQueued(t *testing.T, raw *clientv3.Client, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := raw.Get(ctxFor(t, 5*time.Second), queueDir(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if int(r.Count) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %q has %d waiters, want %d", key, r.Count, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBackend(t *testing.T) {
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)

	t.Run("TokensStrictlyIncrease", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		b := dial(t, srv)
		const k = "tokens"
		var last uint64
		step := func(what string, tok uint64, ok bool, err error) {
			t.Helper()
			if err != nil || !ok {
				t.Fatalf("%s: ok=%v err=%v", what, ok, err)
			}
			if tok <= last {
				t.Fatalf("%s: token %d not greater than %d", what, tok, last)
			}
			last = tok
		}
		tok, ok, err := b.Acquire(ctx, k, "a", 5*time.Second)
		step("first acquire", tok, ok, err)
		if r, err := raw.Get(ctx, lockKey(k)); err != nil || len(r.Kvs) != 1 || uint64(r.Kvs[0].CreateRevision) != tok || string(r.Kvs[0].Value) != "a" {
			t.Fatalf("lock key after acquire: %v %v, want value a, create revision %d", r, err, tok)
		}
		tok, ok, err = b.Acquire(ctx, k, "a", 5*time.Second)
		step("same-owner re-acquire", tok, ok, err)
		if _, ok, err := b.Acquire(ctx, k, "b", 5*time.Second); ok || err != nil {
			t.Fatalf("acquire of a held key by another owner = %v, %v; want false, nil", ok, err)
		}
		if ok, err := b.Release(ctx, k, "a"); !ok || err != nil {
			t.Fatalf("release = %v, %v", ok, err)
		}
		tok, ok, err = b.Acquire(ctx, k, "b", 5*time.Second)
		step("acquire after release", tok, ok, err)
		if ok, err := b.Release(ctx, k, "b"); !ok || err != nil {
			t.Fatalf("release = %v, %v", ok, err)
		}
		tok, err = b.AcquireWait(ctx, k, "c", 5*time.Second)
		step("queued acquire", tok, err == nil, err)
		if ok, err := b.Release(ctx, k, "c"); !ok || err != nil {
			t.Fatalf("release = %v, %v", ok, err)
		}
		if r, err := raw.Get(ctx, etcd.DefaultPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
			t.Fatalf("keys left after release: %v %v", r, err)
		}
	})

	t.Run("ExtendLongerMovesLease", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		b := dial(t, srv)
		const k = "extend"
		if _, ok, err := b.Acquire(ctx, k, "a", 2*time.Second); !ok || err != nil {
			t.Fatalf("acquire = %v, %v", ok, err)
		}
		if ok, err := b.Extend(ctx, k, "a", 30*time.Second); !ok || err != nil {
			t.Fatalf("extend = %v, %v", ok, err)
		}
		r, err := raw.Get(ctx, lockKey(k))
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("get: %v %v", r, err)
		}
		ttl, err := raw.TimeToLive(ctx, clientv3.LeaseID(r.Kvs[0].Lease))
		if err != nil || ttl.GrantedTTL != 30 {
			t.Fatalf("lease after Extend(30s): %+v %v, want granted TTL 30", ttl, err)
		}
		if ok, err := b.Extend(ctx, k, "b", time.Minute); ok || err != nil {
			t.Fatalf("extend by a non-owner = %v, %v; want false, nil", ok, err)
		}
		if ok, err := b.Release(ctx, k, "a"); !ok || err != nil {
			t.Fatalf("release = %v, %v", ok, err)
		}
		if ok, err := b.Release(ctx, k, "a"); ok || err != nil {
			t.Fatalf("second release = %v, %v; want false, nil", ok, err)
		}
	})

	t.Run("AcquireWaitIsFIFO", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		b := dial(t, srv)
		const k = "fifo/a" // a slash: the queue directory must not swallow "fifo/a/b"
		if _, ok, err := b.Acquire(ctx, k, "holder", 10*time.Second); !ok || err != nil {
			t.Fatalf("holder acquire = %v, %v", ok, err)
		}
		var (
			mu    sync.Mutex
			order []string
			toks  []uint64
			wg    sync.WaitGroup
			errs  = make(chan error, 3)
		)
		names := []string{"w1", "w2", "w3"}
		for i, name := range names {
			wb := dial(t, srv) // a client each, as separate processes would have
			wg.Go(func() {
				tok, err := wb.AcquireWait(ctx, k, name, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				order = append(order, name)
				toks = append(toks, tok)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				if ok, err := wb.Release(ctx, k, name); !ok || err != nil {
					errs <- errors.Join(errors.New("release of "+name+" failed"), err)
				}
			})
			waitQueued(t, raw, k, i+1) // arrival order is the order of this loop
		}
		if _, ok, err := b.Acquire(ctx, "fifo/a/b", "other", 10*time.Second); !ok || err != nil {
			t.Fatalf("acquire of another key = %v, %v", ok, err)
		}
		if ok, err := b.Release(ctx, k, "holder"); !ok || err != nil {
			t.Fatalf("holder release = %v, %v", ok, err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := strings.Join(order, ","); got != "w1,w2,w3" {
			t.Fatalf("lock passed in order %s, want w1,w2,w3", got)
		}
		for i := 1; i < len(toks); i++ {
			if toks[i] <= toks[i-1] {
				t.Fatalf("tokens %v do not increase", toks)
			}
		}
		waitQueued(t, raw, k, 0)
	})

	t.Run("CancelledWaiterLeavesQueue", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		b := dial(t, srv)
		const k = "cancel"
		if _, ok, err := b.Acquire(ctx, k, "holder", 10*time.Second); !ok || err != nil {
			t.Fatalf("holder acquire = %v, %v", ok, err)
		}
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		aDone := make(chan error, 1)
		go func() {
			_, err := b.AcquireWait(actx, k, "a", 10*time.Second)
			aDone <- err
		}()
		waitQueued(t, raw, k, 1)
		bDone := make(chan error, 1)
		go func() {
			_, err := b.AcquireWait(ctx, k, "b", 10*time.Second)
			bDone <- err
		}()
		waitQueued(t, raw, k, 2)

		cancel()
		select {
		case err := <-aDone:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled AcquireWait = %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("AcquireWait did not return after cancel")
		}
		waitQueued(t, raw, k, 1)
		if ok, err := b.Release(ctx, k, "holder"); !ok || err != nil {
			t.Fatalf("holder release = %v, %v", ok, err)
		}
		select {
		case err := <-bDone:
			if err != nil {
				t.Fatalf("b's AcquireWait = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("b was not granted the lock after a left the queue and the holder released")
		}
		waitQueued(t, raw, k, 0)
		if ok, err := b.Release(ctx, k, "a"); ok || err != nil {
			t.Fatalf("release by the waiter that left = %v, %v; want false, nil", ok, err)
		}
		if ok, err := b.Release(ctx, k, "b"); !ok || err != nil {
			t.Fatalf("release by b = %v, %v", ok, err)
		}
	})

	t.Run("OpenURL", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		c, err := turnstile.Open(ctx, srv.URL()+"?prefix=/other&dial_timeout=3s&batch=8")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, err := c.TryAcquire(ctx, "opened")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if r, err := raw.Get(ctx, "/other/locks/opened"); err != nil || len(r.Kvs) != 1 {
			t.Fatalf("lock not under the URL's prefix: %v %v", r, err)
		}
	})

	t.Run("Name", func(t *testing.T) {
		if got, want := dial(t, srv).Name(), "etcd "+srv.Endpoint(); got != want {
			t.Fatalf("Name() = %q, want %q", got, want)
		}
	})
}

func TestNilClient(t *testing.T) {
	if _, err := etcd.New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}

func TestBadURLs(t *testing.T) {
	badurl.Refused(t,
		"etcd:127.0.0.1:2379",
		"etcd://127.0.0.1:0",
		"etcd://127.0.0.1:70000",
		"etcd://127.0.0.1:port",
		"etcd://a:2379,,b:2379",
		"etcd://127.0.0.1:2379/locks",
		"etcd://127.0.0.1:2379#x",
		"etcd://127.0.0.1:2379?dial_timeout=soon",
		"etcd://127.0.0.1:2379?dial_timeout=-1s",
		"etcd://127.0.0.1:2379?prefix=",
		"etcd://127.0.0.1:2379?prefix=a&prefix=b",
		"etcd://127.0.0.1:2379?tls=maybe",
		"etcd://127.0.0.1:2379?batch=0",
		"etcd://127.0.0.1:2379?batch=1025",
		"etcd://127.0.0.1:2379?batch=many",
	)
}

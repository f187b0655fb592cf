package etcd_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// sent counts the requests a client sends to etcd: unary calls and the
// messages sent on streams, by method (the last part of its name).
type sent struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *sent) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[method[strings.LastIndexByte(method, '/')+1:]]++
}

// take returns the counts so far and starts again from zero.
func (c *sent) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	if n == nil {
		n = map[string]int{}
	}
	return n
}

type countedStream struct {
	grpc.ClientStream
	method string
	c      *sent
}

func (s countedStream) SendMsg(m any) error {
	s.c.add(s.method)
	return s.ClientStream.SendMsg(m)
}

// countingBackend returns a backend over a client of its own whose
// requests c counts.
func countingBackend(t *testing.T, srv *testserver.Etcd, c *sent) *etcd.Backend {
	t.Helper()
	return dialWith(t, srv,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return countedStream{s, method, c}, nil
		}),
	)
}

// TestPairIsTwoWrites: a Client's Acquire and Release of a free key cost
// etcd two calls, the two writes, as concurrency.Mutex's lock and unlock
// do, and so do TryAcquire and Release: the grant says from when the
// shared lease holds the lock, so the Client does not renew it, and the
// lease, renewed a moment ago, is not renewed again.
func TestPairIsTwoWrites(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	srv := testserver.StartEtcd(t)
	var n sent
	c, err := turnstile.New(countingBackend(t, srv, &n), turnstile.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, acquire := range map[string]func(context.Context, string, ...turnstile.Option) (*turnstile.Lease, error){
		"Acquire": c.Acquire, "TryAcquire": c.TryAcquire,
	} {
		pair := func(key string) {
			t.Helper()
			l, err := acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if v := l.Validity(); v < 8*time.Second {
				t.Fatalf("%s: validity %v of a 10 s lease on a lease renewed just now", name, v)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		pair("warm-up") // grants the shared lease
		n.take()
		const pairs = 20
		for i := range pairs {
			pair(name + string(rune('a'+i)))
		}
		got := n.take()
		if got["Txn"] != 2*pairs || len(got) != 1 {
			t.Fatalf("%d pairs of %s and Release sent %v; want %d Txn and nothing else", pairs, name, got, 2*pairs)
		}
	}
}

// TestGrantSince: AcquireWaitSince's and AcquireSince's since is when
// etcd certainly holds the lock from, for ttl: the shared lease's last
// answered grant or renewal, or a renewal sent with the grant when that
// is more than a tenth of ttl old — for a lock taken at once and for one
// handed over or taken after a wait. etcd's own count of the lease's
// time left agrees. Acquire renews the lease every time.
func TestGrantSince(t *testing.T) {
	ctx := ctxFor(t, 60*time.Second)
	srv := testserver.StartEtcd(t)
	raw := rawClient(t, srv)
	var n sent
	b := countingBackend(t, srv, &n)
	other := dial(t, srv)
	const ttl = 10 * time.Second

	// check takes since from a grant of key that began at before and
	// ended at after: renewed says whether the grant renewed the shared
	// lease, which bounds since from below by before; otherwise since is
	// no later than before.
	check := func(what, key string, since, before, after time.Time, renewed bool) {
		t.Helper()
		if since.After(after) {
			t.Fatalf("%s: since %v after the call's return", what, since.Sub(after))
		}
		if renewed && since.Before(before) {
			t.Fatalf("%s: renewed, yet since %v before the grant", what, before.Sub(since))
		}
		if !renewed && since.After(before) {
			t.Fatalf("%s: not renewed, yet since %v after the grant began", what, since.Sub(before))
		}
		get, err := raw.Get(ctx, lockKey(key))
		if err != nil || len(get.Kvs) != 1 {
			t.Fatalf("%s: lock key: %v %v", what, get, err)
		}
		left, err := raw.TimeToLive(ctx, clientv3.LeaseID(get.Kvs[0].Lease))
		if err != nil {
			t.Fatal(err)
		}
		// etcd gives whole seconds, rounded down, counted by the leader.
		if want := time.Until(since.Add(ttl)) - time.Second; time.Duration(left.TTL)*time.Second < want {
			t.Fatalf("%s: etcd holds the lock %d s more; since promised %v", what, left.TTL, want+time.Second)
		}
	}
	// acquire takes key for owner at once, with AcquireWaitSince and,
	// released, with AcquireSince, and checks since and the keep-alives
	// each sent.
	acquire := func(what, key, owner string, renews int) {
		t.Helper()
		for _, queued := range []bool{true, false} {
			n.take()
			before := time.Now()
			var since time.Time
			var err error
			if queued {
				_, since, err = b.AcquireWaitSince(ctx, key, owner, ttl)
			} else {
				var ok bool
				if _, ok, since, err = b.AcquireSince(ctx, key, owner, ttl); !ok && err == nil {
					t.Fatalf("%s: AcquireSince found the lock held", what)
				}
			}
			after := time.Now()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := n.take()["LeaseKeepAlive"]; got != renews {
				t.Fatalf("%s (queued %v): %d renewals, want %d", what, queued, got, renews)
			}
			check(what, key, since, before, after, renews > 0)
			if queued {
				if ok, err := b.Release(ctx, key, owner); !ok || err != nil {
					t.Fatalf("%s: release: %v %v", what, ok, err)
				}
				if renews > 0 {
					b.AgeLeases(ttl / 5) // as old again for AcquireSince
				}
			}
		}
	}

	n.take()
	before := time.Now()
	_, since, err := b.AcquireWaitSince(ctx, "a", "o", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.take(); got["LeaseGrant"] != 1 || got["LeaseKeepAlive"] != 0 {
		t.Fatalf("first grant sent %v; want a lease granted and none renewed", got)
	}
	check("a lease granted with the lock", "a", since, before, time.Now(), true)

	acquire("a lease granted just now", "b", "o", 0)
	b.AgeLeases(ttl / 20)
	acquire("a lease renewed a twentieth of ttl ago", "c", "o", 0)
	b.AgeLeases(ttl / 5)
	acquire("a lease renewed a fifth of ttl ago", "d", "o", 1)
	time.Sleep(ttl/10 + 100*time.Millisecond)
	acquire("a lease renewed over a tenth of ttl ago", "e", "o", 1)
	if _, ok, err := b.Acquire(ctx, "f", "o", ttl); !ok || err != nil {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	if got := n.take()["LeaseKeepAlive"]; got != 1 {
		t.Fatalf("Acquire sent %d renewals of a lease renewed just now; want 1: its lock is held ttl from its start", got)
	}

	// After a wait: a release hands the lock to b's own waiter (one
	// write), or a holder elsewhere lets go and the waiter takes it.
	for _, handed := range []bool{true, false} {
		for _, aged := range []bool{false, true} {
			key := "wait-" + map[bool]string{true: "handed", false: "taken"}[handed] + map[bool]string{true: "-aged", false: ""}[aged]
			holder := b
			if !handed {
				holder = other
			}
			if _, err := holder.AcquireWait(ctx, key, "holder", ttl); err != nil {
				t.Fatal(err)
			}
			type grant struct {
				since time.Time
				err   error
			}
			done := make(chan grant, 1)
			go func() {
				_, since, err := b.AcquireWaitSince(ctx, key, "waiter", ttl)
				done <- grant{since, err}
			}()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				get, err := raw.Get(ctx, etcd.DefaultPrefix+"queue/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				if get.Count > 0 && (!handed || b.LocalWaiters(key) == 1) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the waiter did not queue", key)
				}
			}
			if aged {
				b.AgeLeases(ttl / 5)
			}
			n.take()
			before := time.Now()
			if ok, err := holder.Release(ctx, key, "holder"); err != nil || !ok {
				t.Fatalf("%s: release: %v %v", key, ok, err)
			}
			g := <-done
			after := time.Now()
			if g.err != nil {
				t.Fatalf("%s: %v", key, g.err)
			}
			renews := 0
			if aged {
				renews = 1
			}
			if got := n.take()["LeaseKeepAlive"]; got != renews {
				t.Fatalf("%s: %d renewals, want %d", key, got, renews)
			}
			check(key, key, g.since, before, after, aged)
		}
	}
}

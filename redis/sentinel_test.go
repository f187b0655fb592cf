package redis_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/redis"
)

// openURL opens a turnstile client on rawURL, closed when the test ends.
func openURL(t *testing.T, rawURL string, opts ...turnstile.Option) *turnstile.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := turnstile.Open(ctx, rawURL, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", rawURL, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// retrying is a Backoff that retries every 50 ms until the context ends.
var retrying = turnstile.WithBackoff(turnstile.Constant{Interval: 50 * time.Millisecond, MaxRetries: -1})

// wantReplicationError fails t unless err is a *redis.ReplicationError
// (wrapped or not) of want replicas of which none confirmed.
func wantReplicationError(t *testing.T, what string, err error, want int) {
	t.Helper()
	var re *redis.ReplicationError
	if !errors.As(err, &re) {
		t.Fatalf("%s: err = %v, want a *redis.ReplicationError", what, err)
	}
	if re.Wanted != want || re.Confirmed != 0 {
		t.Fatalf("%s: %d of %d replicas confirmed; want 0 of %d (%v)", what, re.Confirmed, re.Wanted, want, err)
	}
	if !strings.Contains(err.Error(), "0 of 1 replicas confirmed") {
		t.Fatalf("%s: error %q does not say how many replicas confirmed", what, err)
	}
}

// TestSentinelFailoverIncident goes through the Sentinels of a primary
// with one replica: the lock, its release and its fencing token; the
// acquisition with wait_replicas=1 that fails while the replica is
// stalled (and is released again) and succeeds once it runs; then the
// incident that wait_replicas prevents: a lock granted on the primary
// while the replica is stalled, the primary dies, the Sentinels promote
// the replica, which never had the grant, and a second client is granted
// the same lock. The fencing token still increases across the failover,
// so storage guarded by fence.Redis refuses the first holder's late
// write.
func TestSentinelFailoverIncident(t *testing.T) {
	g := testserver.StartRedisSentinel(t, 1, 3)
	ctx := ctxFor(t, time.Minute)
	guardSrv := testserver.StartRedis(t) // the fenced storage, a server of its own
	guard, err := fence.NewRedis(rueidisClient(t, guardSrv))
	if err != nil {
		t.Fatal(err)
	}

	// The URL's credentials log in to the Sentinels too; these have no
	// such user, and the error says how to leave them out.
	bad := strings.Replace(g.URL(), "://", "://u:s3cret@", 1)
	if c, err := turnstile.Open(ctx, bad); err == nil || !strings.Contains(err.Error(), "sentinel_auth=none") || strings.Contains(err.Error(), "s3cret") {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("open with credentials the Sentinels do not know: %v", err)
	}

	a := openURL(t, g.URL(), turnstile.WithTTL(30*time.Second), retrying)
	l, err := a.Acquire(ctx, "basic")
	if err != nil {
		t.Fatalf("acquire through the sentinels: %v", err)
	}
	t0 := l.Token()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = a.Acquire(ctx, "basic")
	if err != nil || l.Token() <= t0 {
		t.Fatalf("acquire again: token %d after %d, %v", l.Token(), t0, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	primary := g.MustPrimary()
	replica := g.Nodes()[1]
	if primary != g.Nodes()[0] {
		t.Fatalf("the sentinels name %s the primary, not the first node", primary.Addr())
	}
	t.Cleanup(func() { _ = replica.Resume() }) // never leave a stopped process behind

	// wait_replicas=1: with the replica stalled, no grant is confirmed:
	// the acquisition fails and leaves no lock behind.
	w := openURL(t, g.URL()+"?wait_replicas=1&wait_timeout=200ms", turnstile.WithTTL(30*time.Second), retrying)
	wb, ok := w.Backend().(*redis.Backend)
	if !ok {
		t.Fatalf("backend of a redis+sentinel URL is %T", w.Backend())
	}
	if n, d := wb.WaitReplicas(); n != 1 || d != 200*time.Millisecond {
		t.Fatalf("WaitReplicas() = %d, %v; want 1, 200ms", n, d)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	_, ok, err = wb.Acquire(ctx, "w", "w-owner", 30*time.Second)
	if ok {
		t.Fatal("granted with wait_replicas=1 while the only replica is stalled")
	}
	wantReplicationError(t, "acquire, replica stalled", err, 1)
	if n, err := primary.Do("EXISTS", "{w}"); err != nil || n != "0" {
		t.Fatalf("the unconfirmed grant was not released: EXISTS {w} = %q, %v", n, err)
	}
	// A Client keeps trying, as through an outage, and succeeds once the
	// replica runs again.
	got := make(chan error, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		l, err := w.Acquire(actx, "w")
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Acquire with wait_replicas=1 returned while the replica is stalled: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire with wait_replicas=1 once the replica runs: %v", err)
	}

	// The incident: granted while the replica is stalled and cut off
	// from the primary, so the grant is on the primary only. (Stalled
	// alone, the replica would still find the grant in its socket's
	// buffer when it runs again.)
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.Do("CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatal(err)
	}
	first, err := a.Acquire(ctx, "incident")
	if err != nil {
		t.Fatalf("acquire without wait_replicas, replica stalled: %v", err)
	}
	t1 := first.Token()
	if err := guard.Set(ctx, "incident", t1, fence.DataKey("incident", "v"), "first"); err != nil {
		t.Fatalf("the first holder's write: %v", err)
	}
	primary.Kill()
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	promoted, err := g.WaitFailover(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if promoted != replica {
		t.Fatalf("promoted %s, want the replica %s", promoted.Addr(), replica.Addr())
	}
	if n, err := promoted.Do("EXISTS", "{incident}"); err != nil || n != "0" {
		t.Fatalf("the promoted replica has the lock (EXISTS = %q, %v): the grant was replicated after all", n, err)
	}

	// A second client is granted the lock that the first still holds,
	// well before the first's 30 s TTL could have run out.
	b := openURL(t, g.URL(), turnstile.WithTTL(30*time.Second), retrying)
	bctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	second, err := b.Acquire(bctx, "incident")
	cancel()
	if err != nil {
		t.Fatalf("acquire after the failover: %v", err)
	}
	t2 := second.Token()
	if t2 <= t1 {
		t.Fatalf("token after the failover %d is not greater than the lost lock's %d", t2, t1)
	}
	if err := guard.Set(ctx, "incident", t2, fence.DataKey("incident", "v"), "second"); err != nil {
		t.Fatalf("the second holder's write: %v", err)
	}
	err = guard.Set(ctx, "incident", t1, fence.DataKey("incident", "v"), "first, late")
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("the first holder's write after the second's: err = %v, want ErrStaleToken", err)
	}
	if v, err := guardSrv.Do("GET", fence.DataKey("incident", "v")); err != nil || v != "second" {
		t.Fatalf("fenced value %q, %v; want second", v, err)
	}

	// The first client follows the failover: it locks on the new
	// primary, with tokens above the second holder's.
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	again, err := a.Acquire(actx, "incident")
	if err != nil {
		t.Fatalf("the first client after the failover: %v", err)
	}
	if again.Token() <= t2 {
		t.Fatalf("token %d after %d", again.Token(), t2)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_ = first.Release(ctx) // lost: the lock is no longer its
}

// startReplicated starts a primary and a replica of it, without
// Sentinels, and waits until the replica is in sync.
func startReplicated(t testing.TB) (primary, replica *testserver.Redis) {
	t.Helper()
	primary, replica = testserver.StartRedis(t), testserver.StartRedis(t)
	// A replica's full sync starts at once, not after 5 s.
	primary.MustDo(t, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
	host, port, _ := strings.Cut(primary.Addr(), ":")
	replica.MustDo(t, "REPLICAOF", host, port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The replica acknowledges writes (WAIT) once the primary counts
		// it online.
		info, err := primary.Do("INFO", "replication")
		if err == nil && strings.Contains(info, ",state=online,") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not in sync within 20s: %v %s", err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { _ = replica.Resume() })
	return primary, replica
}

// dialURL opens a backend from rawURL as turnstile.Open does, through
// ParseURL.
func dialURL(t testing.TB, rawURL string) *redis.Backend {
	t.Helper()
	opt, opts, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := redis.Dial(ctx, opt, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestWaitReplicasEveryGrant: with wait_replicas=1 on a redis:// URL,
// every path that grants a lock — the plain lock, its hand-off, and the
// lock kinds — and every renewal waits for the replica: with the replica
// stalled each fails with a *ReplicationError (a grant is released
// again, so that another owner takes the key at once), with the replica
// running each succeeds. WAIT counts the writes of its own connection: a
// WAIT sent apart from the grant would find nothing to wait for and
// return at once, and the grants would succeed with the replica stalled.
func TestWaitReplicasEveryGrant(t *testing.T) {
	p, r := startReplicated(t)
	ctx := ctxFor(t, time.Minute)
	// Where the replica runs, a generous timeout: the replica confirms
	// in a millisecond, and the test must pass on a loaded machine too.
	// Where it is stalled, a short one: each attempt waits it out.
	b := dialURL(t, p.URL()+"?wait_replicas=1&wait_timeout=5s")
	stalled := dialURL(t, p.URL()+"?wait_replicas=1&wait_timeout=100ms")
	plain := dial(t, p) // waits for nobody

	// views are the plain lock and every lock kind of a backend.
	views := func(b *redis.Backend) map[string]driver.Backend {
		t.Helper()
		read, write := readWriteOf(t, b)
		return map[string]driver.Backend{
			"plain": b, "read": read, "write": write,
			"reentrant": reentrantOf(t, b), "semaphore": semaphoreOf(t, b, 2), "fair": fairOf(t, b),
		}
	}
	kinds := []string{"plain", "reentrant", "semaphore", "read", "write", "fair"}
	waiting, stalledViews, plainViews := views(b), views(stalled), views(plain)
	const ttl = 30 * time.Second

	// A lease taken while the replica runs, to renew while it is stalled.
	if _, ok, err := b.Acquire(ctx, "held", "holder", ttl); !ok || err != nil {
		t.Fatalf("acquire with the replica running: %v %v", ok, err)
	}

	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		key := "stalled:" + k
		_, ok, err := stalledViews[k].Acquire(ctx, key, "w", ttl)
		if ok {
			t.Fatalf("%s: granted with the replica stalled", k)
		}
		wantReplicationError(t, k+" acquire", err, 1)
		// Released again: a writer that waits for no replica takes it.
		if _, ok, err := plainViews[k].Acquire(ctx, key, "other", ttl); !ok || err != nil {
			t.Fatalf("%s: the unconfirmed grant was left held: %v %v", k, ok, err)
		}
	}
	ok, err := stalled.Extend(ctx, "held", "holder", ttl)
	if ok {
		t.Fatal("renewed with the replica stalled")
	}
	wantReplicationError(t, "extend", err, 1)
	res := stalled.ExtendMany(ctx, []driver.ExtendRequest{{Key: "held", Owner: "holder", TTL: ttl}, {Key: "nobody", Owner: "holder", TTL: ttl}})
	wantReplicationError(t, "extend many", res[0].Err, 1)
	if res[0].OK || res[1].OK || res[1].Err != nil {
		t.Fatalf("ExtendMany = %+v: the held lease is unconfirmed, the other not held", res)
	}

	if err := r.Resume(); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		key := "running:" + k
		if _, ok, err := waiting[k].Acquire(ctx, key, "w", ttl); !ok || err != nil {
			t.Fatalf("%s: acquire with the replica running: %v %v", k, ok, err)
		}
		if ok, err := waiting[k].Extend(ctx, key, "w", ttl); !ok || err != nil {
			t.Fatalf("%s: extend with the replica running: %v %v", k, ok, err)
		}
		if ok, err := waiting[k].Release(ctx, key, "w"); !ok || err != nil {
			t.Fatalf("%s: release: %v %v", k, ok, err)
		}
	}
	if ok, err := b.Extend(ctx, "held", "holder", ttl); !ok || err != nil {
		t.Fatalf("extend with the replica running: %v %v", ok, err)
	}
	// The grant is on the replica once Acquire returns.
	if _, ok, err := b.Acquire(ctx, "replicated", "w", ttl); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if v := r.MustDo(t, "GET", "{replicated}"); v != "w" {
		t.Fatalf("the replica has %q for the lock right after the grant, want its owner", v)
	}
}

// TestWaitReplicasRefused: settings WithWaitReplicas cannot work with
// are refused when the backend is made, not at the first lock.
func TestWaitReplicasRefused(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	if _, err := redis.NewGoRedis(c, redis.WithWaitReplicas(1, 0)); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("go-redis with wait replicas: err = %v, want ErrInvalidOption", err)
	}
	for _, o := range []redis.Option{redis.WithWaitReplicas(-1, 0), redis.WithWaitReplicas(101, 0), redis.WithWaitReplicas(1, -time.Second), redis.WithWaitReplicas(1, 2*time.Minute)} {
		if err := redis.CheckOptions(o); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("CheckOptions = %v, want ErrInvalidOption", err)
		}
	}
	b := dial(t, srv, redis.WithWaitReplicas(1, 0))
	if n, d := b.WaitReplicas(); n != 1 || d != redis.DefaultWaitTimeout {
		t.Fatalf("WaitReplicas() = %d, %v; want 1, %v", n, d, redis.DefaultWaitTimeout)
	}
	// A server without replicas confirms nothing.
	_, ok, err := b.Acquire(ctxFor(t, 10*time.Second), "k", "o", time.Minute)
	if ok {
		t.Fatal("granted with wait replicas and no replica")
	}
	var re *redis.ReplicationError
	if !errors.As(err, &re) || re.Wanted != 1 || re.Confirmed != 0 || re.Timeout != redis.DefaultWaitTimeout {
		t.Fatalf("err = %v, want a ReplicationError of 0 of 1 replicas in %v", err, redis.DefaultWaitTimeout)
	}
	if n := srv.MustDo(t, "EXISTS", "{k}"); n != "0" {
		t.Fatal("the unconfirmed grant was left held")
	}
}

// BenchmarkWaitReplicas measures TryAcquire+Release pairs through a
// Client on a primary with one replica on the same machine, without and
// with wait_replicas=1: what waiting for the replica costs. One op is
// one pair.
func BenchmarkWaitReplicas(b *testing.B) {
	p, _ := startReplicated(b)
	// A generous timeout: TryAcquire makes one attempt, and a replica on a
	// loaded machine may take longer than the default to confirm.
	for _, q := range []string{"", "?wait_replicas=1&wait_timeout=1s"} {
		name := "wait_replicas=0"
		if q != "" {
			name = "wait_replicas=1"
		}
		c, err := turnstile.New(dialURL(b, p.URL()+q))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, n), func(b *testing.B) {
				prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
				locktest.Pairs(b, n, func(ctx context.Context, r *rand.Rand) (*turnstile.Lease, error) {
					return c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
				})
			})
		}
	}
}

// TestWaitOnTheGrantsConnection: WAIT counts the writes of the connection
// it is sent on, so the grant and its WAIT must share one connection. The
// server's MONITOR feed names the client of every command: the script
// that grants the lock and the WAIT after it come from one address.
func TestWaitOnTheGrantsConnection(t *testing.T) {
	srv := testserver.StartRedis(t)
	conn, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if line, err := rd.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", line, err)
	}

	b := dial(t, srv, redis.WithWaitReplicas(1, 10*time.Millisecond))
	ctx := ctxFor(t, 10*time.Second)
	for _, key := range []string{"mon1", "mon2"} { // the first meets NOSCRIPT
		_, _, err := b.Acquire(ctx, key, "o", time.Minute)
		wantReplicationError(t, "acquire without replicas", err, 1)
	}
	// Lines look like: +1700000000.123456 [0 127.0.0.1:40000] "EVALSHA" "..." "1" ...
	grants := map[string]string{} // key -> client of the script that granted it
	for done := 0; done < 2; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading MONITOR: %v (so far %v)", err, grants)
		}
		_, rest, ok := strings.Cut(line, "[")
		client, cmd, ok2 := strings.Cut(rest, "] ")
		if !ok || !ok2 || strings.Contains(client, "lua") {
			continue // a command run by a script
		}
		_, client, _ = strings.Cut(client, " ") // drop the database number
		switch {
		case strings.HasPrefix(cmd, `"EVAL`):
			for _, key := range []string{"mon1", "mon2"} {
				if strings.Contains(cmd, `"{`+key+`}"`) && strings.Contains(cmd, `"o"`) && !strings.Contains(cmd, `"quiet"`) {
					grants[key] = client
				}
			}
		case strings.HasPrefix(cmd, `"WAIT"`):
			for _, key := range []string{"mon1", "mon2"} {
				if from, ok := grants[key]; ok && from != "" {
					if from != client {
						t.Fatalf("the grant of %s came from %s, its WAIT from %s: WAIT counts another connection's writes", key, from, client)
					}
					grants[key] = "" // checked
					done++
				}
			}
		}
	}
}

// TestSentinelTLS: rediss+sentinel:// talks TLS, with the same
// authorities and client certificate, to the Sentinels and to the
// primary they name, each certificate checked against the address
// dialled.
func TestSentinelTLS(t *testing.T) {
	certs := testcerts.New(t)
	g := testserver.StartRedisSentinelTLS(t, certs, 0, 2)
	if !strings.HasPrefix(g.URL(), "rediss+sentinel://") {
		t.Fatalf("URL %q", g.URL())
	}
	ctx := ctxFor(t, 30*time.Second)
	c := openURL(t, g.URL())
	l, err := c.Acquire(ctx, "tls")
	if err != nil {
		t.Fatalf("acquire through TLS sentinels: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// redis+sentinel:// with a TLS parameter speaks TLS too; a name no
	// certificate carries is refused.
	if _, err := turnstile.Open(ctx, strings.Replace(g.URL(), "rediss+sentinel", "redis+sentinel", 1)+"&server_name=elsewhere.example"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("open with a server name that no certificate carries: %v", err)
	}
}

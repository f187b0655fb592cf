package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/mysql"
)

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

func TestBackend(t *testing.T) {
	srv := testserver.StartMySQL(t)
	t.Run("ManyLocksFewConnections", func(t *testing.T) { testManyLocks(t, srv) })
	t.Run("LongNames", func(t *testing.T) { testLongNames(t, srv) })
	t.Run("OwnersShareASession", func(t *testing.T) { testOwnersShareASession(t, srv) })
	t.Run("TokensIncreaseAcrossBackends", func(t *testing.T) { testTokensAcrossBackends(t, srv) })
	t.Run("KilledConnectionLosesLocks", func(t *testing.T) { testKilledConnection(t, srv) })
	t.Run("ExtendMany", func(t *testing.T) { testExtendMany(t, srv) })
	t.Run("IdleConnectionClosed", func(t *testing.T) { testIdleConnectionClosed(t, srv) })
	t.Run("ReleasedIsFreeAfterClockStepsBack", func(t *testing.T) { testReleasedAfterStepBack(t, srv) })
}

// testReleasedAfterStepBack: a released lock is free whatever the row's
// expiry says. A release stamps the row with the server's time; when the
// server's clock then steps back (NTP, a VM restored) that stamp lies in
// the future, as set here by hand — and the lock must still be free, to
// a new session (take.sql) and to one that already has the name's user
// lock (acquire.sql).
func testReleasedAfterStepBack(t *testing.T, srv *testserver.MySQL) {
	ctx := ctxFor(t, time.Minute)
	for _, fresh := range []bool{true, false} {
		key := fmt.Sprintf("stepped-back-%v", fresh)
		a, b := dial(t, srv), dial(t, srv)
		if !fresh {
			b = a // the same session takes the name's user lock again
		}
		tok, ok, err := a.Acquire(ctx, key, "a", 10*time.Second)
		if !ok || err != nil {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		if ok, err := a.Release(ctx, key, "a"); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
		mustExec(t, srv, fmt.Sprintf("UPDATE %s.turnstile_locks SET expires_at = NOW(6) + INTERVAL 60 SECOND WHERE name = %s AND owner = ''",
			mysqlproc.Database, quote(mysql.LockName(key))))
		tok2, ok, err := b.Acquire(ctx, key, "b", 10*time.Second)
		if !ok || err != nil {
			t.Fatalf("a released lock whose row expires in the future (same session %v): acquire = %v, %v; want it free", !fresh, ok, err)
		}
		if tok2 <= tok {
			t.Fatalf("token %d after %d", tok2, tok)
		}
	}
}

// testManyLocks: one Client holds 2,000 locks at once on at most its
// configured connections.
func testManyLocks(t *testing.T, srv *testserver.MySQL) {
	const locks, conns = 2000, 3
	ctx := ctxFor(t, time.Minute)
	before := connections(t, srv)
	b := dial(t, srv, mysql.WithConns(conns))
	c, err := turnstile.New(b, turnstile.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	leases := make([]*turnstile.Lease, 0, locks)
	for i := range locks {
		l, err := c.TryAcquire(ctx, fmt.Sprintf("many:%d", i))
		if err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
		leases = append(leases, l)
	}
	if n := connections(t, srv) - before; n > conns {
		t.Fatalf("%d locks use %d connections, want at most %d", locks, n, conns)
	}
	// Every lock is a user lock on the server, held by at most conns
	// sessions.
	names := make([]string, locks)
	for i := range names {
		names[i] = mysql.UserLockName(b, fmt.Sprintf("many:%d", i))
	}
	used, sessions := userLockSessions(t, srv, names)
	if used != locks || sessions > conns {
		t.Fatalf("%d user locks held by %d sessions, want %d by at most %d", used, sessions, locks, conns)
	}
	other := dial(t, srv)
	for _, i := range []int{0, 999, 1999} {
		if _, ok, err := other.Acquire(ctx, fmt.Sprintf("many:%d", i), "other", time.Second); ok || err != nil {
			t.Fatalf("another backend took held lock %d: ok=%v err=%v", i, ok, err)
		}
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := other.Acquire(ctx, "many:1999", "other", time.Second); !ok || err != nil {
		t.Fatalf("after release: ok=%v err=%v", ok, err)
	}
}

// testLongNames: keys over 64 characters lock under a hashed name, and
// distinct long keys with a common prefix do not contend.
func testLongNames(t *testing.T, srv *testserver.MySQL) {
	ctx := ctxFor(t, time.Minute)
	long := strings.Repeat("k", turnstile.MaxKeyLen-1)
	if n := mysql.LockName(long); len(n) != 64 || !strings.HasPrefix(n, "ts:") {
		t.Fatalf("LockName of a long key = %q", n)
	}
	if mysql.LockName("short") != "short" {
		t.Fatal("short keys must be their own name")
	}
	a, b := dial(t, srv), dial(t, srv)
	for _, k := range []string{long + "1", long + "2"} {
		tok, ok, err := a.Acquire(ctx, k, "a", 10*time.Second)
		if !ok || err != nil || tok == 0 {
			t.Fatalf("acquire %d-byte key: tok=%d ok=%v err=%v", len(k), tok, ok, err)
		}
		if _, ok, err := b.Acquire(ctx, k, "b", 10*time.Second); ok || err != nil {
			t.Fatalf("second backend took a held long key: ok=%v err=%v", ok, err)
		}
		if ok, err := a.Release(ctx, k, "a"); !ok || err != nil {
			t.Fatalf("release: ok=%v err=%v", ok, err)
		}
	}
}

// testOwnersShareASession: two owners on one Backend (one connection, so
// one session, whose GET_LOCK is re-entrant) still exclude each other.
func testOwnersShareASession(t *testing.T, srv *testserver.MySQL) {
	ctx := ctxFor(t, time.Minute)
	b := dial(t, srv, mysql.WithConns(1))
	if _, ok, err := b.Acquire(ctx, "shared", "a", 10*time.Second); !ok || err != nil {
		t.Fatalf("a: ok=%v err=%v", ok, err)
	}
	if _, ok, err := b.Acquire(ctx, "shared", "b", 10*time.Second); ok || err != nil {
		t.Fatalf("b took a's lock on the same session: ok=%v err=%v", ok, err)
	}
	if ok, err := b.Release(ctx, "shared", "b"); ok || err != nil {
		t.Fatalf("b released a's lock: ok=%v err=%v", ok, err)
	}
	if ok, err := b.Release(ctx, "shared", "a"); !ok || err != nil {
		t.Fatalf("a release: ok=%v err=%v", ok, err)
	}
	// The session re-entered nothing: after a's release the name is free
	// for other sessions.
	if _, ok, err := dial(t, srv).Acquire(ctx, "shared", "c", time.Second); !ok || err != nil {
		t.Fatalf("c after a's release: ok=%v err=%v", ok, err)
	}
}

// testTokensAcrossBackends: tokens for one key keep increasing whichever
// Backend (connection) takes it.
func testTokensAcrossBackends(t *testing.T, srv *testserver.MySQL) {
	ctx := ctxFor(t, time.Minute)
	bs := []*mysql.Backend{dial(t, srv), dial(t, srv), dial(t, srv)}
	var last uint64
	for i := range 300 {
		b := bs[i%len(bs)]
		tok, ok, err := b.Acquire(ctx, "tokens", "o", 10*time.Second)
		if !ok || err != nil {
			t.Fatalf("acquire %d: ok=%v err=%v", i, ok, err)
		}
		if tok <= last {
			t.Fatalf("acquire %d: token %d not greater than %d", i, tok, last)
		}
		last = tok
		if ok, err := b.Release(ctx, "tokens", "o"); !ok || err != nil {
			t.Fatalf("release %d: ok=%v err=%v", i, ok, err)
		}
	}
}

// testKilledConnection: KILL of the holding session loses the holder's
// lease (its renewal fails), and the lock stays unavailable to others until
// its TTL ends, then passes on with a larger token.
func testKilledConnection(t *testing.T, srv *testserver.MySQL) {
	const ttl = time.Second
	ctx := ctxFor(t, time.Minute)
	c, err := turnstile.New(dial(t, srv, mysql.WithConns(1)), turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "killed")
	if err != nil {
		t.Fatal(err)
	}
	id := mustExec(t, srv, "SELECT ID FROM information_schema.processlist WHERE user = 'turnstile' LIMIT 1")
	mustExec(t, srv, "KILL "+id)
	killed := time.Now()
	other := dial(t, srv)
	if _, ok, err := other.Acquire(ctx, "killed", "other", ttl); ok || err != nil {
		t.Fatalf("lock passed on before its TTL: ok=%v err=%v", ok, err)
	}
	select {
	case <-l.Context().Done():
		if !errors.Is(context.Cause(l.Context()), turnstile.ErrLockLost) {
			t.Fatalf("cause = %v", context.Cause(l.Context()))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("holder not told of its killed session")
	}
	for {
		tok, ok, err := other.Acquire(ctx, "killed", "other", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if tok <= l.Token() {
				t.Fatalf("token %d after the kill not greater than %d", tok, l.Token())
			}
			if time.Since(killed) < ttl/2 {
				t.Fatalf("lock passed on %v after the kill, before the TTL", time.Since(killed))
			}
			break
		}
		if time.Since(killed) > ttl+5*time.Second {
			t.Fatal("lock never passed on after the killed session")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The killed Backend works again on a new connection.
	if _, err := c.TryAcquire(ctx, "killed-after"); err != nil {
		t.Fatalf("acquire after the kill: %v", err)
	}
}

func TestOpenURL(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"NoUser", "mysql://localhost:3306/db"},
		{"NoDatabase", "mysql://u:p@localhost:3306"},
		{"BadPort", "mysql://u:p@localhost:99999/db"},
		{"BadConns", "mysql://u:p@localhost/db?conns=0"},
		{"ConnsNotANumber", "mysql://u:p@localhost/db?conns=x"},
		{"BadTimeout", "mysql://u:p@localhost/db?dial_timeout=soon"},
		{"BadTLS", "mysql://u:p@localhost/db?tls=maybe"},
		{"UnknownParam", "mysql://u:p@localhost/db?colour=red"},
		{"Fragment", "mysql://u:p@localhost/db#x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := turnstile.Open(context.Background(), tc.url)
			if !errors.Is(err, turnstile.ErrInvalidURL) {
				t.Fatalf("Open(%q) = %v, want ErrInvalidURL", tc.url, err)
			}
			if u, _ := url.Parse(tc.url); strings.Contains(err.Error(), ":p@") && u.User != nil {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func TestOpenConnects(t *testing.T) {
	srv := testserver.StartMySQL(t)
	ctx := ctxFor(t, 30*time.Second)
	c, err := turnstile.Open(ctx, srv.URL()+"?conns=2&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "open")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestServerRestart: a crash of the server ends every session, so holders
// lose their leases, but the rows survive: a lock does not pass on before
// its TTL, and tokens keep increasing.
func TestServerRestart(t *testing.T) {
	const ttl = 2 * time.Second
	srv := testserver.StartMySQL(t)
	ctx := ctxFor(t, time.Minute)
	holder := dial(t, srv)
	acquired := time.Now()
	tok, ok, err := holder.Acquire(ctx, "restart", "holder", ttl)
	if !ok || err != nil {
		t.Fatalf("acquire: ok=%v err=%v", ok, err)
	}
	srv.Restart()
	restarted := time.Now()
	if ok, err := holder.Extend(ctx, "restart", "holder", ttl); ok && err == nil {
		t.Fatal("Extend succeeded on a session the restart ended")
	}
	other := dial(t, srv)
	for {
		tok2, ok, err := other.Acquire(ctx, "restart", "other", ttl)
		if err != nil {
			t.Fatalf("acquire after restart: %v", err)
		}
		if ok {
			if tok2 <= tok {
				t.Fatalf("token after restart %d not greater than %d", tok2, tok)
			}
			if took := time.Since(acquired); took < ttl*9/10 {
				t.Fatalf("lock passed on %v after it was taken, before its TTL %v", took, ttl)
			}
			return
		}
		if time.Since(restarted) > ttl+10*time.Second {
			t.Fatal("lock never passed on after the restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testExtendMany renews 1,000 leases in one batch; the ones removed behind
// their holders' backs, or never held, come back false. The leases are
// taken for 5 s, so that taking them all on a busy machine does not
// outlast the first; then renewed for 20 s, and checked once batch:500's
// first TTL has passed.
func testExtendMany(t *testing.T, srv *testserver.MySQL) {
	const n, ttl = 1000, 5 * time.Second
	ctx := ctxFor(t, time.Minute)
	b := dial(t, srv)
	reqs := make([]driver.ExtendRequest, n)
	var taken500 time.Time
	for i := range reqs {
		reqs[i] = driver.ExtendRequest{Key: fmt.Sprintf("batch:%d", i), Owner: "o", TTL: 20 * time.Second}
		if _, ok, err := b.Acquire(ctx, reqs[i].Key, "o", ttl); !ok || err != nil {
			t.Fatalf("acquire %d: ok=%v err=%v", i, ok, err)
		}
		if i == 500 {
			taken500 = time.Now()
		}
	}
	evict(t, srv, "batch:7")
	reqs[11].Owner = "not-the-owner"
	for i, r := range b.ExtendMany(ctx, reqs) {
		want := i != 7 && i != 11
		if r.Err != nil || r.OK != want {
			t.Fatalf("request %d: ok=%v err=%v, want ok=%v", i, r.OK, r.Err, want)
		}
	}
	time.Sleep(time.Until(taken500.Add(ttl + 500*time.Millisecond))) // past the acquire TTL, within the extended one
	other := dial(t, srv)
	if _, ok, err := other.Acquire(ctx, "batch:500", "p", time.Second); ok || err != nil {
		t.Fatalf("extended lock taken: ok=%v err=%v", ok, err)
	}
	if _, ok, err := other.Acquire(ctx, "batch:7", "p", time.Second); !ok || err != nil {
		t.Fatalf("evicted lock not free: ok=%v err=%v", ok, err)
	}
}

// testIdleConnectionClosed: when the server closes an idle pinned
// connection (wait_timeout), the next Acquire succeeds on a new one.
func testIdleConnectionClosed(t *testing.T, srv *testserver.MySQL) {
	ctx := ctxFor(t, time.Minute)
	before := mustExec(t, srv, "SELECT GROUP_CONCAT(ID) FROM information_schema.processlist WHERE user = 'turnstile'")
	b := dial(t, srv, mysql.WithConns(1))
	if _, ok, err := b.Acquire(ctx, "idle", "o", time.Second); !ok || err != nil {
		t.Fatalf("acquire: ok=%v err=%v", ok, err)
	}
	if ok, err := b.Release(ctx, "idle", "o"); !ok || err != nil {
		t.Fatalf("release: ok=%v err=%v", ok, err)
	}
	q := "SELECT ID FROM information_schema.processlist WHERE user = 'turnstile'"
	if before != "NULL" && before != "" {
		q += " AND ID NOT IN (" + before + ")"
	}
	mustExec(t, srv, "KILL "+mustExec(t, srv, q))
	time.Sleep(100 * time.Millisecond) // let the close reach the client's socket
	if _, ok, err := b.Acquire(ctx, "idle", "o", time.Second); !ok || err != nil {
		t.Fatalf("acquire after the server closed the connection: ok=%v err=%v", ok, err)
	}
}

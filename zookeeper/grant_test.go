package zookeeper_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/zkproc"
	"github.com/turnstilelock/turnstile/zookeeper"
)

// capped starts a server of the test's own that grants sessions of at
// most maxSession, as a production server's maxSessionTimeout does (40 s
// with the default tickTime).
func capped(t *testing.T, maxSession time.Duration) *zkproc.Server {
	t.Helper()
	s, err := zkproc.StartWith(t.TempDir(), zkproc.Options{MaxSessionTimeout: maxSession})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// TestSessionCapRefusesLongerTTL: a server whose maxSessionTimeout is
// shorter than the lease TTL grants a shorter session than turnstile asks
// for. A lease longer than that session is refused at once, with an error
// that names both figures and what to change, whether the session was
// derived from the TTL, set in the URL, or set with Dial.
func TestSessionCapRefusesLongerTTL(t *testing.T) {
	ctx := ctxFor(t, 90*time.Second)
	own := capped(t, 4*time.Second)
	clear := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("error %v, want one matching turnstile.ErrInvalidOption", err)
		}
		for _, want := range []string{"30s", "4s", "maxSessionTimeout"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %q", err, want)
			}
		}
		t.Logf("error: %v", err)
	}
	for _, u := range []string{"zookeeper://" + own.Addr(), "zookeeper://" + own.Addr() + "?session_timeout=30s"} {
		c, err := turnstile.Open(ctx, u, turnstile.WithTTL(30*time.Second))
		if err == nil {
			_, err = c.TryAcquire(ctx, "capped")
			_ = c.Close()
		}
		clear(t, err)
	}

	b, err := zookeeper.Dial(ctx, []string{own.Addr()}, zookeeper.WithSessionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	_, ok, err := b.Acquire(ctx, "capped", "o", 30*time.Second)
	if ok {
		t.Fatal("Backend.Acquire with a TTL longer than the granted session took the lock")
	}
	clear(t, err)
	_, err = b.AcquireWait(ctx, "capped", "o", 30*time.Second)
	clear(t, err)

	// A TTL within the granted session is fine.
	c, err := turnstile.Open(ctx, "zookeeper://"+own.Addr(), turnstile.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "capped")
	if err != nil {
		t.Fatalf("TryAcquire with a TTL within the granted session: %v", err)
	}
	_ = l.Release(ctx)
}

// TestCappedSessionPartitionedHolder: a holder cut off from a server that
// caps sessions at 4 s never believes it holds the lock after the server
// has expired its session and given the lock to another client. Its lease
// is either refused (a TTL over the cap) or ends, by its own clock,
// before the other client's node was created.
func TestCappedSessionPartitionedHolder(t *testing.T) {
	const maxSession = 4 * time.Second
	ctx := ctxFor(t, 3*time.Minute)
	own := capped(t, maxSession)
	raw, _, err := zk.Connect([]string{own.Addr()}, maxSession, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	for _, ttl := range []time.Duration{30 * time.Second, 3 * time.Second} {
		t.Run(ttl.String(), func(t *testing.T) {
			key := "partitioned-" + ttl.String()
			p := startProxy(t, own.Addr())
			a, err := turnstile.Open(ctx, "zookeeper://"+p.Addr(), turnstile.WithTTL(ttl))
			var l *turnstile.Lease
			if err == nil {
				defer a.Close()
				l, err = a.TryAcquire(ctx, key)
			}
			if errors.Is(err, turnstile.ErrInvalidOption) {
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p.partition(true)
			ab := a.Backend().(*zookeeper.Backend)
			for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
				if _, err := ab.Inspect(ctx, key); errors.Is(err, zookeeper.ErrSuspended) {
					break
				}
				if time.Since(start) > 10*time.Second {
					t.Fatal("the holder never noticed the partition")
				}
			}
			// No renewal can succeed any more: the lease's end is fixed.
			v := l.Validity()
			believes := time.Now().Add(v)

			b, err := turnstile.Open(ctx, "zookeeper://"+own.Addr(), turnstile.WithTTL(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var l2 *turnstile.Lease
			for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
				l2, err = b.TryAcquire(ctx, key)
				if err == nil {
					break
				}
				if !errors.Is(err, turnstile.ErrNotAcquired) || time.Since(start) > 30*time.Second {
					t.Fatalf("the other client's TryAcquire after the partition: %v", err)
				}
			}
			defer l2.Release(ctx)
			granted := nodeCreated(t, raw, b.Backend().(*zookeeper.Backend).Dir(key))
			t.Logf("holder's lease ends %v after the other client's node was created", believes.Sub(granted))
			if believes.After(granted) {
				t.Fatalf("the partitioned holder believes its lease until %v, after the server gave the lock to another client at %v",
					believes.Format(time.StampMilli), granted.Format(time.StampMilli))
			}
		})
	}
}

// nodeCreated returns when the first node in dir was created, by the
// server's clock (the same host's as the test's).
func nodeCreated(t *testing.T, c *zk.Conn, dir string) time.Time {
	t.Helper()
	names, _, err := c.Children(dir)
	if err != nil || len(names) == 0 {
		t.Fatalf("children of %s: %v, %v", dir, names, err)
	}
	sort.Slice(names, func(i, j int) bool { return names[i][len(names[i])-10:] < names[j][len(names[j])-10:] })
	_, st, err := c.Get(dir + "/" + names[0])
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(st.Ctime)
}

// TestRenegotiatedSessionLosesLease: a server restarted with a lower
// maxSessionTimeout shortens the session of a client that reconnects to
// it below the TTL of the leases it holds. Those leases are lost at
// their next renewal, and their locks given up, rather than trusted for
// a TTL the session no longer covers; new leases that long are refused.
func TestRenegotiatedSessionLosesLease(t *testing.T) {
	const ttl = 30 * time.Second
	ctx := ctxFor(t, 3*time.Minute)
	own := capped(t, 0)
	c, err := turnstile.Open(ctx, "zookeeper://"+own.Addr(), turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "renegotiated")
	if err != nil {
		t.Fatal(err)
	}
	if err := own.SetOptions(zkproc.Options{MaxSessionTimeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	select {
	case <-l.Context().Done():
	case <-time.After(2 * ttl):
		t.Fatalf("the lease is still held %v after the session was cut to 2s", time.Since(restarted))
	}
	cause := context.Cause(l.Context())
	t.Logf("lease lost %v after the restart: %v", time.Since(restarted), cause)
	if !errors.Is(cause, turnstile.ErrLockLost) || !strings.Contains(cause.Error(), "refused") {
		t.Fatalf("lease ended with %v, want a refused renewal (ErrLockLost)", cause)
	}
	// The lock was given up: another client takes it at once.
	other, err := turnstile.Open(ctx, "zookeeper://"+own.Addr(), turnstile.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if l2, err := other.TryAcquire(ctx, "renegotiated"); err != nil {
		t.Fatalf("TryAcquire after the holder gave the lock up: %v", err)
	} else {
		_ = l2.Release(ctx)
	}
	if _, err := c.TryAcquire(ctx, "renegotiated-again"); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("TryAcquire of a %v lease on a 2s session = %v, want ErrInvalidOption", ttl, err)
	}
}

package zookeeper_test

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/tlstest"
	"github.com/turnstilelock/turnstile/zookeeper"
)

// TestDigestAuth: with user:password in the URL, the session
// authenticates with ZooKeeper's digest scheme and every node turnstile
// creates carries the ACL of those credentials alone, so that a client
// without them — or with others — can neither see, join nor break a
// holder's lock.
func TestDigestAuth(t *testing.T) {
	const (
		pw      = "QJZVWKalicepwQJZVWK"
		wrongPW = "QJZVWKwrongQJZVWK"
	)
	ctx := ctxFor(t, 60*time.Second)
	chroot := "/digest-auth"
	open := func(t *testing.T, userinfo, query string) (*turnstile.Client, error) {
		t.Helper()
		if userinfo != "" {
			userinfo += "@"
		}
		raw := "zookeeper://" + userinfo + srv.Addr() + chroot
		if query != "" {
			raw += "?" + query
		}
		return turnstile.Open(ctx, raw, turnstile.WithTTL(3*time.Second))
	}
	secrets := tlstest.Secrets{pw, wrongPW, "QJZVWK"}

	holder, err := open(t, "alice:"+pw, "")
	if err != nil {
		t.Fatalf("Open with credentials: %v", err)
	}
	defer holder.Close()
	l, err := holder.TryAcquire(ctx, "guarded")
	if err != nil {
		t.Fatalf("TryAcquire with credentials: %v", err)
	}
	b := holder.Backend().(*zookeeper.Backend)
	dir := b.Dir("guarded")
	raw := rawConn(t) // no credentials
	alice := authConn(t, "alice", pw)
	names, _, err := alice.Children(dir)
	if err != nil || len(names) != 1 {
		t.Fatalf("children of %s with the credentials: %v, %v", dir, names, err)
	}
	node := dir + "/" + names[0]

	t.Run("ACLs", func(t *testing.T) {
		want := zk.DigestACL(zk.PermAll, "alice", pw)
		for _, p := range []string{chroot, chroot + "/turnstile", path.Dir(dir), dir, node} {
			acl, _, err := alice.GetACL(p) // ZooKeeper shows an ACL to whom it lets read
			if err != nil {
				t.Fatalf("GetACL(%s): %v", p, err)
			}
			if len(acl) != 1 || acl[0] != want[0] {
				t.Fatalf("ACL of %s = %+v, want %+v only", p, acl, want)
			}
		}
	})

	t.Run("UnauthenticatedClient", func(t *testing.T) {
		if err := raw.Delete(node, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("delete of the holder's node without credentials = %v, want zk.ErrNoAuth", err)
		}
		if _, _, err := raw.Children(dir); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("listing the queue without credentials = %v, want zk.ErrNoAuth", err)
		}
		if _, err := raw.Create(dir+"/intruder-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("joining the queue without credentials = %v, want zk.ErrNoAuth", err)
		}
		if err := raw.Delete(dir, -1); err == nil {
			t.Fatal("deleted the key's directory without credentials")
		}
		c, err := open(t, "", "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.TryAcquire(ctx, "guarded")
		if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("TryAcquire without credentials = %v, want ErrPermission naming %s", err, dir)
		}
	})

	t.Run("WrongCredentials", func(t *testing.T) {
		for _, userinfo := range []string{"alice:" + wrongPW, "mallory:" + pw} {
			c, err := open(t, userinfo, "")
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			_, err = c.TryAcquire(ctx, "guarded")
			if !errors.Is(err, turnstile.ErrPermission) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("TryAcquire with wrong credentials = %v, want ErrPermission naming %s", err, dir)
			}
			t.Logf("error: %v", err)
			secrets.CheckHidden(t, err)
			if _, err := c.Acquire(ctx, "guarded"); !errors.Is(err, turnstile.ErrPermission) {
				t.Fatalf("Acquire (queued) with wrong credentials = %v, want ErrPermission", err)
			}
			// Stealing: releasing the holder's owner, or by force.
			if _, err := c.Backend().Release(ctx, "guarded", l.Owner()); !errors.Is(err, turnstile.ErrPermission) {
				t.Fatalf("Release of the holder's owner with wrong credentials = %v, want ErrPermission", err)
			}
			if _, err := c.ForceRelease(ctx, "guarded"); !errors.Is(err, turnstile.ErrPermission) {
				t.Fatalf("ForceRelease with wrong credentials = %v, want ErrPermission", err)
			}
			secrets.CheckHidden(t, err)
			_ = c.Close()
		}
	})

	t.Run("HolderKeepsLease", func(t *testing.T) {
		if err := l.Extend(ctx, 3*time.Second); err != nil {
			t.Fatalf("holder's Extend after the attempts: %v", err)
		}
		st, err := holder.Inspect(ctx, "guarded")
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Owner != l.Owner() {
			t.Fatalf("Inspect by the holder: %+v, %v; want the holder %s", st, err, l.Owner())
		}
	})

	t.Run("PasswordFile", func(t *testing.T) {
		c, err := open(t, "alice", "password_file="+url.QueryEscape(tlstest.PasswordFile(t, pw)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.TryAcquire(ctx, "guarded"); !errors.Is(err, turnstile.ErrNotAcquired) {
			t.Fatalf("TryAcquire of the held lock with the same credentials = %v, want ErrNotAcquired", err)
		}
		if st, err := c.Inspect(ctx, "guarded"); err != nil || len(st.Holders) != 1 || st.Holders[0].Owner != l.Owner() {
			t.Fatalf("Inspect with the same credentials: %+v, %v", st, err)
		}
	})

	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// authConn is a plain ZooKeeper client with user's credentials.
func authConn(t *testing.T, user, pw string) *zk.Conn {
	t.Helper()
	c := rawConn(t)
	if err := c.AddAuth("digest", []byte(user+":"+pw)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDigestAuthReconnect: the credentials are sent again when the
// client reconnects within its session, so the nodes it creates after a
// cut connection still carry its ACL and it can still read its queue.
func TestDigestAuthReconnect(t *testing.T) {
	const pw = "QJZVWKbobQJZVWK"
	ctx := ctxFor(t, 60*time.Second)
	p := startProxy(t, srv.Addr())
	c, err := turnstile.Open(ctx, "zookeeper://bob:"+pw+"@"+p.Addr()+"/digest-reconnect?session_timeout=20s",
		turnstile.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before, err := c.TryAcquire(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	p.partition(true)
	time.Sleep(300 * time.Millisecond)
	p.partition(false)
	var after *turnstile.Lease
	for deadline := time.Now().Add(15 * time.Second); ; {
		after, err = c.TryAcquire(ctx, "after")
		if err == nil || time.Now().After(deadline) || errors.Is(err, turnstile.ErrPermission) {
			break
		}
		time.Sleep(100 * time.Millisecond) // suspended until the client reconnects
	}
	if err != nil {
		t.Fatalf("TryAcquire after reconnecting: %v", err)
	}
	if err := before.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend of a lock taken before the cut: %v", err)
	}
	dir := c.Backend().(*zookeeper.Backend).Dir("after")
	acl, _, err := authConn(t, "bob", pw).GetACL(dir)
	if err != nil || len(acl) != 1 || acl[0] != zk.DigestACL(zk.PermAll, "bob", pw)[0] {
		t.Fatalf("ACL of %s created after reconnecting: %+v, %v", dir, acl, err)
	}
	_ = after.Release(ctx)
	_ = before.Release(ctx)
}

package zookeeper_test

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/zookeeper"
)

// mkdirAll creates p and its parents with acl, as a client of its own
// would; nodes that exist are left as they are.
func mkdirAll(t *testing.T, c *zk.Conn, p string, acl []zk.ACL) {
	t.Helper()
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if _, err := c.Create(p[:i], nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p[:i], err)
		}
	}
}

// TestDigestACLOfPrecreatedNodes: two tenants side by side on one
// server, one with digest credentials and one without. A directory that
// the anonymous tenant created first — the root, a key's directory, a
// kind's directory — is open to it; a credentialed client that put its
// nodes in there could have them deleted by anyone (unlock --force
// without credentials). The credentialed client refuses every such
// directory, naming it, and an anonymous ForceRelease cannot remove its
// locks.
func TestDigestACLOfPrecreatedNodes(t *testing.T) {
	const pw = "QJZVWKcarolQJZVWK"
	ctx := ctxFor(t, 90*time.Second)
	anon := rawConn(t)
	carol := authConn(t, "carol", pw)
	open := func(t *testing.T, userinfo, chroot string) *turnstile.Client {
		t.Helper()
		c, err := openAt(ctx, userinfo, chroot)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	refused := func(t *testing.T, err error, node string) {
		t.Helper()
		if !errors.Is(err, turnstile.ErrPermission) || !errors.Is(err, zookeeper.ErrOpenACL) || !strings.Contains(err.Error(), node+" ") {
			t.Fatalf("error %v, want ErrPermission and ErrOpenACL naming %s", err, node)
		}
		if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "QJZVWK") {
			t.Fatalf("error %q shows the password", err)
		}
		t.Logf("refused: %v", err)
	}

	t.Run("Root", func(t *testing.T) {
		const chroot = "/acl-open-root"
		root := chroot + zookeeper.DefaultRoot
		mkdirAll(t, anon, root+"/k", zk.WorldACL(zk.PermAll))
		c, err := openAt(ctx, "carol:"+pw, chroot)
		if err == nil {
			defer c.Close()
			var l *turnstile.Lease
			if l, err = c.TryAcquire(ctx, "k"); err == nil {
				mallory := open(t, "", chroot)
				if _, ferr := mallory.ForceRelease(ctx, "k"); ferr == nil {
					if xerr := l.Extend(ctx, 5*time.Second); xerr != nil {
						t.Logf("the anonymous client's ForceRelease removed the credentialed holder's lock: %v", xerr)
					}
				}
				t.Fatalf("a credentialed client took a lock in %s, whose ACL lets anyone delete its node", root+"/k")
			}
		}
		refused(t, err, root)
	})

	t.Run("Directories", func(t *testing.T) {
		const chroot = "/acl-open-dirs"
		root := chroot + zookeeper.DefaultRoot
		// Left by earlier unauthenticated use: the root and some
		// directories, all open; then the root alone was given carol's
		// ACL.
		for _, d := range []string{"k", "k.semaphore", "k.rw", "k.reentrant"} {
			mkdirAll(t, anon, root+"/"+d, zk.WorldACL(zk.PermAll))
		}
		if _, err := anon.SetACL(root, zk.DigestACL(zk.PermAll, "carol", pw), -1); err != nil {
			t.Fatal(err)
		}
		c := open(t, "carol:"+pw, chroot)
		dir := c.Backend().(*zookeeper.Backend).Dir("k")
		_, err := c.TryAcquire(ctx, "k")
		refused(t, err, dir)
		_, err = c.Acquire(ctx, "k")
		refused(t, err, dir)
		if names, _, err := carol.Children(dir); err != nil || len(names) != 0 {
			t.Fatalf("nodes left in the open directory: %v, %v", names, err)
		}
		sem, err := turnstile.Semaphore(c.Backend(), 2)
		if err != nil {
			t.Fatal(err)
		}
		reentrant, err := turnstile.Reentrant(c.Backend())
		if err != nil {
			t.Fatal(err)
		}
		read, write, err := turnstile.ReadWrite(c.Backend())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []struct {
			suffix string
			b      driver.Backend
		}{{"semaphore", sem}, {"reentrant", reentrant}, {"rw", read}, {"rw", write}} {
			kc, err := turnstile.New(k.b, turnstile.WithTTL(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			_, err = kc.TryAcquire(ctx, "k")
			_ = kc.Close()
			refused(t, err, dir+"."+k.suffix)
		}

		// A key whose directory carol's client creates is fine, and
		// the anonymous tenant cannot force its lock away.
		l, err := c.TryAcquire(ctx, "fresh")
		if err != nil {
			t.Fatalf("TryAcquire of a key without a directory: %v", err)
		}
		mallory := open(t, "", chroot)
		if _, err := mallory.ForceRelease(ctx, "fresh"); !errors.Is(err, turnstile.ErrPermission) {
			t.Fatalf("anonymous ForceRelease of a credentialed lock = %v, want ErrPermission", err)
		}
		if err := l.Extend(ctx, 3*time.Second); err != nil {
			t.Fatalf("holder's Extend after the anonymous ForceRelease: %v", err)
		}
		_ = l.Release(ctx)
	})

	t.Run("Replaced", func(t *testing.T) {
		// A directory verified once and then replaced by an open one
		// (the container emptied and removed, another made in its place)
		// is checked again.
		const chroot = "/acl-replaced"
		root := chroot + zookeeper.DefaultRoot
		c := open(t, "carol:"+pw, chroot)
		dir := c.Backend().(*zookeeper.Backend).Dir("cycled")
		l, err := c.TryAcquire(ctx, "cycled")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := carol.Delete(dir, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		if _, err := carol.SetACL(root, zk.WorldACL(zk.PermAll), -1); err != nil {
			t.Fatal(err)
		}
		if _, err := anon.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := carol.SetACL(root, zk.DigestACL(zk.PermAll, "carol", pw), -1); err != nil {
			t.Fatal(err)
		}
		_, err = c.TryAcquire(ctx, "cycled")
		refused(t, err, dir)
	})

	t.Run("OthersMayNotRead", func(t *testing.T) {
		// An ACL that adds read access for anyone still lets them list
		// every queue: refused too.
		const chroot = "/acl-readable"
		root := chroot + zookeeper.DefaultRoot
		mkdirAll(t, carol, path.Dir(root), zk.DigestACL(zk.PermAll, "carol", pw))
		acl := append(zk.DigestACL(zk.PermAll, "carol", pw), zk.WorldACL(zk.PermRead)...)
		if _, err := carol.Create(root, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
		_, err := openAt(ctx, "carol:"+pw, chroot)
		refused(t, err, root)
	})
}

// openAt opens a Client on the package's server under chroot, with
// userinfo's credentials if not empty.
func openAt(ctx context.Context, userinfo, chroot string) (*turnstile.Client, error) {
	if userinfo != "" {
		userinfo += "@"
	}
	return turnstile.Open(ctx, "zookeeper://"+userinfo+srv.Addr()+chroot, turnstile.WithTTL(3*time.Second))
}

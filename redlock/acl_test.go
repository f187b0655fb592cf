package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// aclPassword is the nodes' ACL user's password: no error may show it.
const aclPassword = "Redlock-acl-pw-3d9a"

// aclNode are the commands a Redlock node's user needs: those of the
// redis backend's locking, and INFO for the restart quarantine.
var aclNode = []string{
	"evalsha", "eval", "ssubscribe", "sunsubscribe", "ping",
	"get", "set", "append", "del", "exists", "pexpire", "pttl", "persist", "time", "incr", "spublish",
	"hexists", "hget", "hset", "hincrby",
	"zadd", "zrem", "zrank", "zcard", "zscore", "zrangebyscore", "zremrangebyscore",
	"info",
}

// setNodeUsers creates the ACL user turnstile on every node: the keys
// and channels of the prefix app:, and cmds.
func setNodeUsers(t *testing.T, srvs []*testserver.Redis, cmds []string) {
	t.Helper()
	args := []string{"ACL", "SETUSER", "turnstile", "reset", "on", ">" + aclPassword,
		"resetkeys", "~app:*", "resetchannels", "&app:*", "-@all"}
	for _, c := range cmds {
		args = append(args, "+"+c)
	}
	for _, s := range srvs {
		s.MustDo(t, args...)
		s.MustDo(t, "ACL", "LOG", "RESET")
	}
}

// TestACLRedlock: a Redlock whose nodes' user has exactly the node
// recipe locks, waits and fences with every node refusing nothing; a
// node user missing a command makes the acquisition fail with an error
// that matches turnstile.ErrPermission, names the command and shows no
// password.
func TestACLRedlock(t *testing.T) {
	srvs := startNodes(t, 3)
	ctx := ctxFor(t, 2*time.Minute)
	url := strings.Replace(redlockURL(srvs, "prefix=app:&quarantine=2s&node_timeout=300ms"),
		"redlock://", "redlock://turnstile:"+aclPassword+"@", 1)
	open := func() *turnstile.Client {
		t.Helper()
		c, err := turnstile.Open(ctx, url, turnstile.WithTTL(2*time.Second),
			turnstile.WithBackoff(turnstile.Constant{Interval: 20 * time.Millisecond, MaxRetries: 1000}))
		if err != nil {
			t.Fatalf("open as the ACL user: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	setNodeUsers(t, srvs, aclNode)
	c := open()
	// The first attempts meet the nodes' restart quarantine (2 s, at least
	// the TTL), and retry until it ends.
	l, err := c.Acquire(ctx, "job")
	if err != nil {
		t.Fatalf("acquire under the node recipe: %v", err)
	}
	held := 0
	for _, s := range srvs {
		if s.MustDo(t, "EXISTS", "app:{job}") == "1" {
			held++
		}
	}
	if held < 2 {
		t.Errorf("%d nodes hold the lock key app:{job}, fewer than a quorum", held)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	l2, err := c.Acquire(ctx, "job")
	if err != nil {
		t.Fatalf("second acquire: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after %d", l2.Token(), l.Token())
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	for i, s := range srvs {
		// Do returns the array's length.
		if n := s.MustDo(t, "ACL", "LOG"); n != "0" {
			t.Errorf("node %d logged %s ACL refusals under the recipe", i+1, n)
		}
	}

	for _, tc := range []struct{ drop, want string }{
		{"evalsha", "EVALSHA"},
		{"info", "INFO"}, // the quarantine's read of the server's start
	} {
		var cmds []string
		for _, c := range aclNode {
			if c != tc.drop {
				cmds = append(cmds, c)
			}
		}
		setNodeUsers(t, srvs, cmds)
		for _, s := range srvs {
			s.MustDo(t, "FLUSHALL") // the quarantine's start markers too
		}
		_, err := open().TryAcquire(ctx, "job")
		if !errors.Is(err, turnstile.ErrPermission) {
			t.Fatalf("without +%s: %v, want an error matching ErrPermission", tc.drop, err)
		}
		var pe *redis.PermissionError
		if !errors.As(err, &pe) || pe.Command != tc.drop {
			t.Errorf("without +%s: the permission error names %+v", tc.drop, pe)
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), aclPassword) {
			t.Errorf("without +%s: the error does not name %s, or shows the password: %v", tc.drop, tc.want, err)
		}
	}
}

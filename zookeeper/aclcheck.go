package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"

	"github.com/turnstilelock/turnstile"
)

// ErrOpenACL means a node that a Backend with digest credentials would
// keep its locks in grants some permission to others: the root, a key's
// directory or a kind's directory, created before by a client without
// those credentials (earlier unauthenticated use, or an attacker who
// came first). ZooKeeper checks a delete against the parent's ACL, so
// anyone the directory lets in could delete a holder's node, or queue
// ahead of it. Errors wrapping it also wrap turnstile.ErrPermission.
var ErrOpenACL = errors.New("zookeeper: node open to other clients")

// aclCacheMax bounds how many verified directories an aclChecker
// remembers; past it, it forgets them all and verifies them again.
const aclCacheMax = 10000

// aclChecker verifies, for a Backend with digest credentials, that the
// directories it creates nodes in grant nothing to anyone else, and
// remembers each directory it verified by the zxid that created it: the
// write that creates a lock node also returns its directory's, so a
// directory verified once costs nothing more until ZooKeeper removes it
// (an empty container) and another is made in its place.
type aclChecker struct {
	mine zk.ACL // the Backend's own entry: digest, user:hash

	mu sync.Mutex
	ok map[string]int64 // directory → creation zxid of the one verified
}

func newACLChecker(mine zk.ACL) *aclChecker {
	return &aclChecker{mine: mine, ok: make(map[string]int64)}
}

func (c *aclChecker) known(dir string, czxid int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	z, ok := c.ok[dir]
	return ok && z == czxid
}

func (c *aclChecker) remember(dir string, czxid int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ok) >= aclCacheMax {
		clear(c.ok)
	}
	c.ok[dir] = czxid
}

// foreign returns the entries of acl that grant something to anyone but
// the Backend's user.
func (c *aclChecker) foreign(acl []zk.ACL) []zk.ACL {
	var out []zk.ACL
	for _, a := range acl {
		if a.Perms != 0 && (a.Scheme != c.mine.Scheme || a.ID != c.mine.ID) {
			out = append(out, a)
		}
	}
	return out
}

// checkDir verifies the ACL of dir, of which the caller saw the
// incarnation created by czxid, unless that one was verified before. A
// Backend without credentials has nothing to verify. Errors other than
// ErrOpenACL are the server's (zk.ErrNoNode for a dir gone meanwhile).
func (b *Backend) checkDir(ctx context.Context, dir string, czxid int64) error {
	if b.acls == nil || (czxid != 0 && b.acls.known(dir, czxid)) {
		return nil
	}
	type reply struct {
		acl []zk.ACL
		st  *zk.Stat
	}
	r, err := call(ctx, func() (reply, error) {
		acl, st, err := b.conn.GetACL(dir)
		return reply{acl, st}, err
	})
	if err != nil {
		return fmt.Errorf("zookeeper: read the ACL of %s: %w", dir, err)
	}
	if others := b.acls.foreign(r.acl); len(others) > 0 {
		return b.openACL(dir, others)
	}
	b.acls.remember(dir, r.st.Czxid)
	return nil
}

// checkRoot verifies the root's ACL, if the root exists: one that lets
// others in would let them make key directories open to all. A root
// whose ACL this user may not read belongs to other credentials: the
// server refuses this user's requests there, each with an error that
// names the node.
func (b *Backend) checkRoot(ctx context.Context) error {
	err := b.checkDir(ctx, b.root, 0)
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNoAuth) {
		return nil // a missing root is made with the Backend's ACL when first needed
	}
	return err
}

// openACL is the error for dir, whose ACL grants others what others
// lists, with what to do about it. It names no secret: a digest entry
// shows its user, not its password's hash.
func (b *Backend) openACL(dir string, others []zk.ACL) error {
	grants := make([]string, len(others))
	for i, a := range others {
		id := a.ID
		if a.Scheme == "digest" {
			id, _, _ = strings.Cut(id, ":")
		}
		grants[i] = a.Scheme + ":" + id + ":" + perms(a.Perms)
	}
	return fmt.Errorf("%w: %w: %s grants %s: whoever that lets in could delete the nodes of user %q's locks in it, or queue ahead of them; turnstile keeps a client's locks only in nodes that grant nothing to other users. Give it %q's ACL alone (zkCli: addauth digest %s:<password>, then setAcl %s auth::cdrwa), or delete it while no lock is held, or use another chroot",
		turnstile.ErrPermission, ErrOpenACL, dir, strings.Join(grants, ", "), b.user, b.user, b.user, dir)
}

// perms writes ZooKeeper permissions as zkCli does: cdrwa.
func perms(p int32) string {
	var s strings.Builder
	for _, f := range []struct {
		bit  int32
		name byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if p&f.bit != 0 {
			s.WriteByte(f.name)
		}
	}
	return s.String()
}

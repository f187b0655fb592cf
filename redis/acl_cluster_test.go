package redis_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// aclCluster are what a Redis Cluster adds to the recipes: ASKING,
// which the client sends before a command redirected to a node that is
// importing the key's slot, and ROLE, with which turnstile ls skips
// replicas. CLUSTER SLOTS, the cluster's map, is in aclLock already.
var aclCluster = []string{"asking", "role"}

// TestACLCluster: on a Redis Cluster whose every node has the ACL user
// with the locking and operator recipes and aclCluster, locks on keys of
// every node are taken, waited for, listed and removed by force, also
// while a slot migrates, and no node refuses anything.
func TestACLCluster(t *testing.T) {
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t) }) // after the clients close
	cl := testserver.StartRedisCluster(t)
	ctx := ctxFor(t, 2*time.Minute)
	rules := aclRules(aclPrefix, aclLock, aclOperator, aclCluster)
	for _, n := range cl.Nodes() {
		for _, cmd := range [][]string{append([]string{"ACL", "SETUSER", "turnstile", "reset"}, rules...), {"ACL", "LOG", "RESET"}} {
			if _, err := n.Do(cmd...); err != nil {
				t.Fatalf("%s on %s: %v", cmd[:2], n.Addr(), err)
			}
		}
	}
	url := "redis://turnstile:" + aclPassword + "@" + strings.Join(cl.Addrs(), ",") + "?prefix=" + aclPrefix
	open := func(opts ...turnstile.Option) *turnstile.Client {
		c, err := turnstile.Open(ctx, url, append([]turnstile.Option{turnstile.WithTTL(10 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatalf("open the cluster as the ACL user: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := open()
	w := open(turnstile.WithBackoff(turnstile.Constant{Interval: time.Minute, MaxRetries: -1}))

	// Keys on every node, each waited for by a client woken by the
	// release notice on its node.
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("job-%d", i)
	}
	for _, k := range keys {
		l, err := c.Acquire(ctx, k)
		if err != nil {
			t.Fatalf("acquire %s: %v", k, err)
		}
		got := make(chan error, 1)
		go func() {
			wl, err := w.Acquire(ctx, k)
			if err == nil {
				err = wl.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond)
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s: %v", k, err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("waiter of %s: %v", k, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the waiter of %s was not woken by the release notice", k)
		}
	}

	// The operator's calls across the nodes.
	for _, k := range keys {
		if _, err := c.Acquire(ctx, k); err != nil {
			t.Fatalf("acquire %s: %v", k, err)
		}
	}
	states, _, err := c.List(ctx, "job-", 100)
	if err != nil || len(states) != len(keys) {
		t.Fatalf("List: %d locks, %v; want %d", len(states), err, len(keys))
	}
	for _, k := range keys {
		if st, err := c.ForceRelease(ctx, k); err != nil || !st.Held {
			t.Fatalf("ForceRelease %s: %+v, %v", k, st, err)
		}
	}

	// A slot being migrated: the old owner redirects with ASK a call
	// whose keys it no longer has, and the client sends ASKING to the
	// new owner before the call. The lock's keys move first, as a
	// resharding moves them one batch at a time: on the new owner the
	// renewal finds both (a call whose keys are missing on both sides
	// gets TRYAGAIN until the migration ends).
	const k = "ask"
	held, err := c.Acquire(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	lk := aclPrefix + "{" + k + "}"
	slot, err := cl.Do("CLUSTER", "KEYSLOT", lk)
	if err != nil {
		t.Fatal(err)
	}
	var from, to *redisproc.Server
	for _, n := range cl.Nodes() {
		if _, err := n.Do("EXISTS", lk); err == nil {
			from = n // the others answer MOVED
		} else if to == nil {
			to = n
		}
	}
	if from == nil || to == nil {
		t.Fatalf("no owner of slot %s, or no other node", slot)
	}
	fromID, err1 := from.Do("CLUSTER", "MYID")
	toID, err2 := to.Do("CLUSTER", "MYID")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	toHost, toPort, _ := net.SplitHostPort(to.Addr())
	for _, cmd := range [][]string{
		{"CLUSTER", "SETSLOT", slot, "IMPORTING", fromID},
		{"CLUSTER", "SETSLOT", slot, "MIGRATING", toID},
		{"MIGRATE", toHost, toPort, "", "0", "5000", "KEYS", lk, lk + ":fence"},
	} {
		n := to
		if cmd[0] != "CLUSTER" || cmd[3] == "MIGRATING" {
			n = from
		}
		if _, err := n.Do(cmd...); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
	if err := held.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("renewal of %s while its slot migrates: %v", k, err)
	}
	if stats, err := to.Do("INFO", "commandstats"); err != nil || !strings.Contains(stats, "cmdstat_asking:calls=") {
		t.Errorf("the new owner of the migrating slot ran no ASKING (%v)", err)
	}

	for i, n := range cl.Nodes() {
		admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{n.Addr()}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		log, err := admin.Do(ctx, admin.B().AclLog().Count(100).Build()).ToArray()
		admin.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range log {
			m, _ := e.AsStrMap()
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range m {
					if !yield(k) {
						return
					}
				}
			})
			var parts []string
			for _, k := range keys {
				if k == "reason" || k == "object" || k == "context" || k == "count" {
					parts = append(parts, k+"="+m[k])
				}
			}
			t.Errorf("node %d refused the ACL user: %s", i+1, strings.Join(parts, " "))
		}
	}
}

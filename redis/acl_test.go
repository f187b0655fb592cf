package redis_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// The minimal Redis ACL of turnstile, as docs/security (Redis ACL) gives
// it: a user limited to the keys and channels of its prefix and to the
// commands turnstile sends. The tests below create users with exactly
// these rules.

// aclPassword is the ACL user's password: no error may contain it.
const aclPassword = "Acl-pw-7c41e9d2"

// aclPrefix is the prefix of the URLs (?prefix=app:): every key and
// channel turnstile uses starts with it.
const aclPrefix = "app:"

var (
	// aclLock are the commands of locking: every lock kind, waiting on
	// release notices, renewals, fencing tokens. Redis 7.0 and later.
	aclLock = []string{
		// the scripts: EVALSHA, and EVAL when the server lost its
		// script cache (no SCRIPT LOAD, even before a pipelined batch)
		"evalsha", "eval",
		// release notices, and the client library's health checks
		"ssubscribe", "sunsubscribe", "ping",
		// the client library asks, when it connects, whether the server
		// is a cluster node
		"cluster|slots",
		// called by the scripts
		"get", "set", "append", "del", "exists", "pexpire", "pttl", "persist", "time", "incr", "spublish",
		"hexists", "hget", "hset", "hincrby",
		"zadd", "zrem", "zrank", "zcard", "zscore", "zrangebyscore", "zremrangebyscore",
	}
	// aclOperator are what turnstile status, ls and unlock add: SCAN for
	// ls, and the commands of the inspect and force-release scripts.
	aclOperator = []string{"scan", "type", "zcount", "hkeys"}
	// aclInfo is what a Redlock node's restart quarantine (the acquire
	// script reads the server's start time) and turnstile bench (INFO
	// commandstats, cpu and server) add.
	aclInfo = []string{"info"}
	// aclRarely are commands of the recipe that a script calls only in
	// a case turnstile's own locks never reach: RaiseFence's PERSIST of
	// a fence whose lock has no expiry.
	aclRarely = []string{"persist"}
)

// aclRules are the ACL SETUSER rules of a user of prefix allowed cmds:
//
//	on >PASSWORD resetkeys ~PREFIX* resetchannels &PREFIX* -@all +cmd...
func aclRules(prefix string, cmds ...[]string) []string {
	r := []string{"on", ">" + aclPassword, "resetkeys", "~" + prefix + "*", "resetchannels", "&" + prefix + "*", "-@all"}
	for _, cs := range cmds {
		for _, c := range cs {
			r = append(r, "+"+c)
		}
	}
	return r
}

// setUser creates (or replaces) the ACL user turnstile with rules.
func setUser(t testing.TB, srv *testserver.Redis, rules []string) {
	t.Helper()
	srv.MustDo(t, append([]string{"ACL", "SETUSER", "turnstile", "reset"}, rules...)...)
}

// without returns rules without the rule drop.
func without(rules []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r == drop })
}

// aclURL is the URL of srv as the ACL user, with the test's prefix.
func aclURL(srv *testserver.Redis) string {
	return "redis://turnstile:" + aclPassword + "@" + srv.Addr() + "?prefix=" + aclPrefix
}

// openACL opens a Client as the ACL user, closed when the test ends.
func openACL(t testing.TB, ctx context.Context, srv *testserver.Redis, opts ...turnstile.Option) (*turnstile.Client, *redis.Backend) {
	t.Helper()
	c, err := turnstile.Open(ctx, aclURL(srv), append([]turnstile.Option{turnstile.WithTTL(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("open as the ACL user: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, c.Backend().(*redis.Backend)
}

// commandStats reads which commands the server ran (calls > 0) and which
// it refused (rejected or failed calls), by INFO commandstats.
func commandStats(t testing.TB, srv *testserver.Redis) (ran, refused map[string]bool) {
	t.Helper()
	info := srv.MustDo(t, "INFO", "commandstats")
	ran, refused = map[string]bool{}, map[string]bool{}
	field := func(fields, name string) int {
		m := regexp.MustCompile(`(?:^|,)` + name + `=(\d+)`).FindStringSubmatch(fields)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		if field(fields, "calls") > 0 {
			ran[name] = true
		}
		if field(fields, "rejected_calls") > 0 {
			refused[name] = true
		}
	}
	return ran, refused
}

// checkACLLog fails the test if the server refused the ACL user anything.
func checkACLLog(t testing.TB, srv *testserver.Redis) {
	t.Helper()
	// Do returns the array's length.
	if n := srv.MustDo(t, "ACL", "LOG"); n != "0" {
		t.Errorf("the server logged ACL refusals (%s entries): the recipe lacks something", n)
	}
}

// checkRan compares the commands the server ran with the recipe: every
// command run is in it, and every command of it but those in rarely was
// run, so the recipe is exactly what turnstile sends.
func checkRan(t testing.TB, srv *testserver.Redis, recipe []string, rarely ...string) {
	t.Helper()
	ran, refused := commandStats(t, srv)
	// The test's own commands, and those every user may send (HELLO
	// with AUTH).
	admin := map[string]bool{
		"acl|setuser": true, "acl|log": true, "config|resetstat": true, "info": true,
		"pubsub|shardchannels": true, "script|flush": true, "hello": true, "auth": true,
	}
	for c := range ran {
		if !slices.Contains(recipe, c) && !admin[c] {
			t.Errorf("turnstile ran %q, which the recipe does not allow", c)
		}
	}
	for _, c := range recipe {
		if !ran[c] && !slices.Contains(rarely, c) && c != "info" {
			t.Errorf("the recipe allows %q, which turnstile never ran", c)
		}
	}
	for c := range refused {
		t.Errorf("the server refused %q", c)
	}
}

// exerciseLocking uses every locking feature through c and b (a Client
// and its Backend, as the ACL user), failing the test on any error.
func exerciseLocking(t *testing.T, ctx context.Context, srv *testserver.Redis, c *turnstile.Client, b *redis.Backend) {
	t.Helper()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// A plain lock, renewed, and a waiter of another client, which only
	// the release notice can wake before its minute of backoff.
	l, err := c.Acquire(ctx, "job")
	must("acquire", err)
	if got := srv.MustDo(t, "GET", "app:{job}"); got != l.Owner() {
		t.Fatalf("lock key app:{job} holds %q, want the owner %q", got, l.Owner())
	}
	must("extend", l.Extend(ctx, 10*time.Second))
	w, _ := openACL(t, ctx, srv, turnstile.WithBackoff(turnstile.Constant{Interval: time.Minute, MaxRetries: -1}))
	got := make(chan *turnstile.Lease, 1)
	waitErr := make(chan error, 1)
	go func() {
		wl, err := w.Acquire(ctx, "job")
		if err != nil {
			waitErr <- err
			return
		}
		got <- wl
	}()
	waitForSubscriber(t, ctx, srv, "app:{job}:released")
	// And until its attempt found the lock held and marked it waited for,
	// so that the release sends the notice.
	for srv.MustDo(t, "GET", "app:{job}") != l.Owner()+"\x01" {
		if ctx.Err() != nil {
			t.Fatal("the waiter never tried to take the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	released := time.Now()
	must("release", l.Release(ctx))
	var wl *turnstile.Lease
	select {
	case wl = <-got:
	case err := <-waitErr:
		t.Fatalf("waiter: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not woken by the release notice within 30 s (its backoff is a minute)")
	}
	t.Logf("waiter took the lock %v after the release", time.Since(released).Round(time.Millisecond))
	if wl.Token() <= l.Token() {
		t.Fatalf("waiter's token %d is not above the first holder's %d", wl.Token(), l.Token())
	}
	// Fencing: raise the fence, and the next token is above it.
	raised := wl.Token() + 1_000_000
	ok, err := b.RaiseFence(ctx, "job", wl.Owner(), raised)
	if err != nil || !ok {
		t.Fatalf("RaiseFence: ok=%v err=%v", ok, err)
	}
	must("release the waiter's lease", wl.Release(ctx))
	l, err = c.Acquire(ctx, "job")
	must("acquire after raising the fence", err)
	if l.Token() <= raised {
		t.Fatalf("token %d after raising the fence to %d", l.Token(), raised)
	}
	if got := srv.MustDo(t, "GET", "app:{job}:fence"); got != strconv.FormatUint(l.Token(), 10) {
		t.Fatalf("fence key app:{job}:fence holds %q, want %d", got, l.Token())
	}
	// Renewals of many leases go in one pipelined batch.
	for _, r := range b.ExtendMany(ctx, []driver.ExtendRequest{{Key: "job", Owner: l.Owner(), TTL: 10 * time.Second}}) {
		if !r.OK || r.Err != nil {
			t.Fatalf("ExtendMany: ok=%v err=%v", r.OK, r.Err)
		}
	}
	// A release with its notice in any case (an election's resignation).
	if ok, _, err := b.ReleaseNotice(ctx, "job", l.Owner(), driver.NoticeAlways); err != nil || !ok {
		t.Fatalf("ReleaseNotice: ok=%v err=%v", ok, err)
	}

	// Reentrant: entered twice, one token.
	re, err := turnstile.New(reentrantOf(t, b), turnstile.WithTTL(10*time.Second), turnstile.WithOwner("me"))
	must("reentrant client", err)
	defer re.Close()
	r1, err := re.Acquire(ctx, "re")
	must("reentrant acquire", err)
	r2, err := re.Acquire(ctx, "re")
	must("reentrant re-entry", err)
	if r1.Token() != r2.Token() {
		t.Fatalf("re-entry token %d, want %d", r2.Token(), r1.Token())
	}
	must("reentrant extend", r2.Extend(ctx, 10*time.Second))
	must("reentrant release", r2.Release(ctx))
	must("reentrant release", r1.Release(ctx))

	// Read-write: two readers, then a writer (which waits for them).
	read, write := readWriteOf(t, b)
	rc, err := turnstile.New(read, turnstile.WithTTL(10*time.Second))
	must("read client", err)
	defer rc.Close()
	wc, err := turnstile.New(write, turnstile.WithTTL(10*time.Second))
	must("write client", err)
	defer wc.Close()
	rd1, err := rc.Acquire(ctx, "rw")
	must("read lock", err)
	rd2, err := rc.Acquire(ctx, "rw")
	must("second read lock", err)
	if _, err := wc.TryAcquire(ctx, "rw"); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("write lock under readers: %v, want ErrNotAcquired", err)
	}
	must("read extend", rd1.Extend(ctx, 10*time.Second))
	must("read release", rd1.Release(ctx))
	must("read release", rd2.Release(ctx))
	wr, err := wc.Acquire(ctx, "rw")
	must("write lock", err)
	must("write extend", wr.Extend(ctx, 10*time.Second))
	must("write release", wr.Release(ctx))

	// Semaphore of two permits.
	sc, err := turnstile.New(semaphoreOf(t, b, 2), turnstile.WithTTL(10*time.Second))
	must("semaphore client", err)
	defer sc.Close()
	p1, err := sc.Acquire(ctx, "sem")
	must("permit", err)
	p2, err := sc.Acquire(ctx, "sem")
	must("second permit", err)
	if _, err := sc.TryAcquire(ctx, "sem"); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Fatalf("third permit of two: %v, want ErrNotAcquired", err)
	}
	must("permit extend", p1.Extend(ctx, 10*time.Second))
	must("permit release", p1.Release(ctx))
	must("permit release", p2.Release(ctx))

	// Fair: a waiter queues, learns its place, and takes the lock on the
	// release; another gives up its place.
	fc, err := turnstile.New(fairOf(t, b), turnstile.WithTTL(10*time.Second))
	must("fair client", err)
	defer fc.Close()
	fl, err := fc.Acquire(ctx, "fair")
	must("fair lock", err)
	place := make(chan int, 10)
	fgot := make(chan error, 1)
	go func() {
		l, err := fc.Acquire(ctx, "fair", turnstile.WithQueuePosition(func(p int) { place <- p }))
		if err == nil {
			err = l.Release(ctx)
		}
		fgot <- err
	}()
	select {
	case p := <-place:
		if p != 1 {
			t.Fatalf("fair waiter's place %d, want 1", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the fair waiter was told no place in line")
	}
	gctx, giveUp := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := fc.Acquire(gctx, "fair"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second fair waiter giving up: %v", err)
	}
	giveUp()
	must("fair release", fl.Release(ctx))
	select {
	case err := <-fgot:
		must("fair waiter", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the fair waiter did not take the lock after the release")
	}
}

// waitForSubscriber waits until a client subscribes to channel.
func waitForSubscriber(t testing.TB, ctx context.Context, srv *testserver.Redis, channel string) {
	t.Helper()
	for {
		// Do returns the first line of the array: its length.
		n, err := srv.Do("PUBSUB", "SHARDCHANNELS", channel)
		if err == nil && n != "*0" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("nobody subscribed to %s: %v", channel, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestACLLocking: under exactly the locking recipe — the keys and
// channels of the prefix, and the commands of aclLock — every lock kind
// works, a waiter wakes on the release notice, fencing tokens increase;
// the server refused nothing, and every command of the recipe was used.
func TestACLLocking(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 2*time.Minute)
	setUser(t, srv, aclRules(aclPrefix, aclLock))
	srv.MustDo(t, "CONFIG", "RESETSTAT")
	c, b := openACL(t, ctx, srv)
	exerciseLocking(t, ctx, srv, c, b)
	// A server that lost its scripts (a restart, SCRIPT FLUSH) gets them
	// again with EVAL.
	srv.MustDo(t, "SCRIPT", "FLUSH")
	l, err := c.Acquire(ctx, "after-flush")
	if err != nil {
		t.Fatalf("acquire after SCRIPT FLUSH: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	checkACLLog(t, srv)
	checkRan(t, srv, aclLock, aclRarely...)
	if keys := srv.MustDo(t, "EVAL", "local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do if k:sub(1, 4) ~= 'app:' then n = n + 1 end end return n", "0"); keys != "0" {
		t.Errorf("%s keys outside the prefix", keys)
	}
}

// TestACLOperator: under the operator recipe (the locking one, SCAN and
// the inspect scripts' commands, and no key outside the prefix: the
// fence guard keys a forced unlock raises lie under it), Inspect, List
// and ForceRelease of every lock kind — turnstile status, ls and
// unlock --force — work.
func TestACLOperator(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 2*time.Minute)
	setUser(t, srv, aclRules(aclPrefix, aclLock, aclOperator))
	srv.MustDo(t, "CONFIG", "RESETSTAT")
	_, b := openACL(t, ctx, srv)
	exerciseOperator(t, ctx, b)
	checkACLLog(t, srv)
	checkRan(t, srv, append(slices.Clone(aclLock), aclOperator...),
		// the operator's calls on their own: no waiting, renewing or queueing
		"ssubscribe", "sunsubscribe", "ping", "append", "exists", "incr", "hexists", "hset", "hincrby",
		"zrank", "zrem", "zscore", "zremrangebyscore", "zcard", "persist", "eval", "hget", "pexpire")
}

// exerciseOperator takes a lock of each kind and inspects, lists and
// removes it by force through c's and b's views.
func exerciseOperator(t *testing.T, ctx context.Context, b *redis.Backend) {
	t.Helper()
	read, write := readWriteOf(t, b)
	sem := semaphoreOf(t, b, 2)
	fair := fairOf(t, b)
	views := map[string]driver.Backend{
		"plain": b, "fair": fair, "reentrant": reentrantOf(t, b),
		"read": read, "write": write, "semaphore": sem,
	}
	for _, name := range slices.Sorted(maps.Keys(views)) {
		v := views[name]
		key := "op-" + name
		vc, err := turnstile.New(v, turnstile.WithTTL(10*time.Second), turnstile.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		l, err := vc.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("%s: acquire: %v", name, err)
		}
		st, err := vc.Inspect(ctx, key)
		if err != nil || !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != l.Owner() {
			t.Fatalf("%s: Inspect = %+v, %v; want held by %s", name, st, err, l.Owner())
		}
		all, _, err := vc.List(ctx, "op-", 100)
		if err != nil || !slices.ContainsFunc(all, func(s turnstile.LockState) bool { return s.Key == key }) {
			t.Fatalf("%s: List = %+v, %v; want %s among them", name, all, err, key)
		}
		st, err = vc.ForceRelease(ctx, key)
		if err != nil || !st.Held {
			t.Fatalf("%s: ForceRelease = %+v, %v", name, st, err)
		}
		if st, err := vc.Inspect(ctx, key); err != nil || st.Held {
			t.Fatalf("%s: after ForceRelease, Inspect = %+v, %v", name, st, err)
		}
		_ = vc.Close()
	}
}

// TestACLRestartQuarantine: a Redlock node's restart quarantine needs
// INFO besides the locking recipe (the acquire script reads the server's
// uptime); without it, the acquisition is refused naming INFO.
func TestACLRestartQuarantine(t *testing.T) {
	srv, ctx := startRedis(t)
	node := func() *redis.Backend {
		rc, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{srv.Addr()}, Username: "turnstile", Password: aclPassword,
			DisableCache: true, ForceSingleClient: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		b, err := redis.New(rc, redis.WithPrefix(aclPrefix), redis.WithRestartQuarantine(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	setUser(t, srv, aclRules(aclPrefix, aclLock))
	_, _, err := node().Acquire(ctx, "q", "o", 10*time.Second)
	checkRefusal(t, err, "INFO", "+info")

	setUser(t, srv, aclRules(aclPrefix, aclLock, aclInfo))
	srv.MustDo(t, "ACL", "LOG", "RESET")
	nb := node()
	var tok uint64
	var ok bool
	// The first acquisition finds the server started less than the
	// millisecond of quarantine ago.
	for range 100 {
		if tok, ok, err = nb.Acquire(ctx, "q2", "o", 10*time.Second); !errors.Is(err, redis.ErrQuarantined) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || !ok || tok == 0 {
		t.Fatalf("acquire with the quarantine under the recipe and +info: token %d ok=%v err=%v", tok, ok, err)
	}
	checkACLLog(t, srv)
}

// checkRefusal checks err is a permission error naming each of want,
// and without the password.
func checkRefusal(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error: the server refused nothing")
	}
	if !errors.Is(err, turnstile.ErrPermission) {
		t.Fatalf("error does not match turnstile.ErrPermission: %v", err)
	}
	var pe *redis.PermissionError
	if !errors.As(err, &pe) {
		t.Fatalf("error is no *redis.PermissionError: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not name %q: %v", w, err)
		}
	}
	if strings.Contains(err.Error(), aclPassword) {
		t.Errorf("error shows the password: %v", err)
	}
}

// TestACLMissingPermission: under the locking recipe less one permission,
// the call that needs it fails with an error that matches
// turnstile.ErrPermission and names what is missing — a command turnstile
// sends, a command a script calls, a key, a channel — over both client
// libraries; the password is in none.
func TestACLMissingPermission(t *testing.T) {
	srv := testserver.StartRedis(t)
	full := aclRules(aclPrefix, aclLock)
	type step func(t *testing.T, ctx context.Context, b *redis.Backend) error
	acquire := func(key string) step {
		return func(_ *testing.T, ctx context.Context, b *redis.Backend) error {
			_, _, err := b.Acquire(ctx, key, "owner", 10*time.Second)
			return err
		}
	}
	takeThen := func(key string, then step) step {
		return func(t *testing.T, ctx context.Context, b *redis.Backend) error {
			if _, ok, err := b.Acquire(ctx, key, "owner", 10*time.Second); err != nil || !ok {
				t.Fatalf("acquire %s: ok=%v err=%v", key, ok, err)
			}
			return then(t, ctx, b)
		}
	}
	// release takes key and releases it after another owner failed to
	// take it: a release that publishes its notice.
	release := func(key string) step {
		return takeThen(key, func(t *testing.T, ctx context.Context, b *redis.Backend) error {
			if _, ok, err := b.Acquire(ctx, key, "waiter", 10*time.Second); err != nil || ok {
				t.Fatalf("a second owner's acquire %s: ok=%v err=%v", key, ok, err)
			}
			_, err := b.Release(ctx, key, "owner")
			return err
		})
	}
	cases := []struct {
		name  string
		rules []string
		run   step
		want  []string
	}{
		{"evalsha", without(full, "+evalsha"), acquire("a1"), []string{"EVALSHA", "+evalsha"}},
		{"time in the acquire script", without(full, "+time"), acquire("a2"), []string{"TIME", "+time"}},
		{"spublish in the release script", without(full, "+spublish"), release("a3"), []string{"SPUBLISH", "+spublish"}},
		{"append in the acquire script", without(full, "+append"), takeThen("a30", func(_ *testing.T, ctx context.Context, b *redis.Backend) error {
			_, _, err := b.Acquire(ctx, "a30", "waiter", 10*time.Second)
			return err
		}), []string{"APPEND", "+append"}},
		{"pexpire in the extend script", without(full, "+pexpire"), takeThen("a4", func(_ *testing.T, ctx context.Context, b *redis.Backend) error {
			_, err := b.Extend(ctx, "a4", "owner", 10*time.Second)
			return err
		}), []string{"PEXPIRE", "+pexpire"}},
		{"ssubscribe", without(full, "+ssubscribe"), func(_ *testing.T, ctx context.Context, b *redis.Backend) error {
			_, stop, err := b.Released(ctx, "a5")
			if err == nil {
				stop()
			}
			return err
		}, []string{"SSUBSCRIBE", "+ssubscribe"}},
		{"zadd in the semaphore script", without(full, "+zadd"), func(t *testing.T, ctx context.Context, b *redis.Backend) error {
			sem := semaphoreOf(t, b, 3)
			_, _, err := sem.Acquire(ctx, "a7", "owner", 10*time.Second)
			return err
		}, []string{"ZADD", "+zadd"}},
		{"hset in the reentrant script", without(full, "+hset"), func(t *testing.T, ctx context.Context, b *redis.Backend) error {
			_, _, err := reentrantOf(t, b).Acquire(ctx, "a8", "owner", 10*time.Second)
			return err
		}, []string{"HSET", "+hset"}},
		{"key pattern", without(full, "~app:*"), acquire("a9"), []string{`"app:{a9}"`, "~pattern"}},
		{"key pattern of another prefix", append(without(full, "~app:*"), "~other:*"), acquire("a10"), []string{`"app:{a10}"`}},
		{"channel pattern on release", without(full, "&app:*"), release("a11"), []string{`"app:{a11}:released"`, "&pattern"}},
		{"channel pattern on subscribe", without(full, "&app:*"), func(_ *testing.T, ctx context.Context, b *redis.Backend) error {
			_, stop, err := b.Released(ctx, "a12")
			if err == nil {
				stop()
			}
			return err
		}, []string{`"app:{a12}:released"`, "&pattern"}},
		{"channel pattern on a semaphore's release", without(full, "&app:*"), func(t *testing.T, ctx context.Context, b *redis.Backend) error {
			sem := semaphoreOf(t, b, 3)
			if _, ok, err := sem.Acquire(ctx, "a13", "owner", 10*time.Second); err != nil || !ok {
				t.Fatalf("acquire a permit: ok=%v err=%v", ok, err)
			}
			_, err := sem.Release(ctx, "a13", "owner")
			return err
		}, []string{`"app:{a13}:released"`}},
		{"scan", aclRules(aclPrefix, aclLock), func(_ *testing.T, ctx context.Context, b *redis.Backend) error {
			_, _, err := b.List(ctx, "", 10)
			return err
		}, []string{"SCAN", "+scan"}},
		{"type in the inspect script", aclRules(aclPrefix, aclLock), func(_ *testing.T, ctx context.Context, b *redis.Backend) error {
			_, err := b.Inspect(ctx, "a14")
			return err
		}, []string{"TYPE", "+type"}},
	}
	clients := map[string]func(t *testing.T) *redis.Backend{
		"rueidis": func(t *testing.T) *redis.Backend {
			_, b := openACL(t, ctxFor(t, time.Minute), srv)
			return b
		},
		"go-redis": func(t *testing.T) *redis.Backend {
			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Username: "turnstile", Password: aclPassword})
			t.Cleanup(func() { _ = c.Close() })
			b, err := redis.NewGoRedis(c, redis.WithPrefix(aclPrefix))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	for _, lib := range slices.Sorted(maps.Keys(clients)) {
		for _, tc := range cases {
			t.Run(lib+"/"+tc.name, func(t *testing.T) {
				srv.MustDo(t, "FLUSHALL")
				setUser(t, srv, tc.rules)
				ctx := ctxFor(t, time.Minute)
				b := clients[lib](t)
				err := tc.run(t, ctx, b)
				t.Logf("%v", err)
				checkRefusal(t, err, tc.want...)
			})
		}
	}
}

// TestACLMissingPermissionClient: through a Client, a refusal reaches
// Acquire, Release and the operator calls as turnstile.ErrPermission.
func TestACLMissingPermissionClient(t *testing.T) {
	srv, ctx := startRedis(t)

	setUser(t, srv, without(aclRules(aclPrefix, aclLock), "+evalsha"))
	c, _ := openACL(t, ctx, srv)
	_, err := c.TryAcquire(ctx, "job")
	checkRefusal(t, err, "EVALSHA", `"job"`)
	_, err = c.Acquire(ctx, "job", turnstile.WithBackoff(turnstile.Constant{Interval: 10 * time.Millisecond, MaxRetries: 2}))
	checkRefusal(t, err, "EVALSHA")

	setUser(t, srv, without(aclRules(aclPrefix, aclLock), "&app:*"))
	l, err := c.Acquire(ctx, "job")
	if err != nil {
		t.Fatalf("acquire without the channel pattern: %v", err)
	}
	// Another process fails to take it, so the release publishes.
	if _, ok, err := c.Backend().Acquire(ctx, "job", "waiter", 10*time.Second); err != nil || ok {
		t.Fatalf("a second owner's acquire: ok=%v err=%v", ok, err)
	}
	checkRefusal(t, l.Release(ctx), `"app:{job}:released"`)

	setUser(t, srv, aclRules(aclPrefix, aclLock))
	_, _, err = c.List(ctx, "", 10)
	checkRefusal(t, err, "SCAN")
	_, err = c.Inspect(ctx, "job")
	checkRefusal(t, err, "TYPE")
}

// TestACLWrongPassword: a wrong password, or none for a server that
// requires one, is an authentication error that shows no password.
func TestACLWrongPassword(t *testing.T) {
	srv, ctx := startRedis(t)
	setUser(t, srv, aclRules(aclPrefix, aclLock))
	srv.MustDo(t, "ACL", "SETUSER", "default", "off")
	for _, url := range []string{
		"redis://turnstile:" + aclPassword + "-wrong@" + srv.Addr(),
		"redis://nobody:" + aclPassword + "@" + srv.Addr(),
		"redis://" + srv.Addr(),
	} {
		c, err := turnstile.Open(ctx, url)
		if err == nil {
			_ = c.Close()
			t.Fatalf("open succeeded with wrong credentials")
		}
		t.Logf("%v", err)
		msg := err.Error()
		if strings.Contains(msg, aclPassword) {
			t.Errorf("error shows the password: %v", err)
		}
		if !strings.Contains(msg, "WRONGPASS") && !strings.Contains(msg, "NOAUTH") {
			t.Errorf("error does not say the server refused the credentials: %v", err)
		}
		if errors.Is(err, turnstile.ErrPermission) || errors.Is(err, turnstile.ErrInvalidURL) {
			t.Errorf("an authentication failure matches ErrPermission or ErrInvalidURL: %v", err)
		}
	}
}

// TestACLScriptsCommands: every command the Lua scripts call is in one
// of the recipes, so a script that starts calling another command fails
// here until the recipe (and its documentation) names it.
func TestACLScriptsCommands(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	all := slices.Concat(aclLock, aclOperator, aclInfo)
	call := regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z|]+)'`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			c := strings.ToLower(m[1])
			if c == "publish" {
				continue // Redis before 7.0 only, instead of spublish
			}
			if !slices.Contains(all, c) {
				t.Errorf("%s calls %s, which no ACL recipe allows", f, m[1])
			}
		}
	}
}

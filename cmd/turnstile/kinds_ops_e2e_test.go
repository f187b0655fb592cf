//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// opsStore is a store the operator commands are run against, with the
// lock kinds it has.
type opsStore struct {
	name      string
	url       func(t *testing.T) string
	fair      bool // a line of waiters the store counts
	semaphore bool
}

// kindCase is a lock kind held on a key while status, ls and unlock
// --force look at it.
type kindCase struct {
	name string
	kind string   // what status and ls call it
	run  []string // the kind flags of the runs that hold it; nil: held through the library (reentrant)
	// holders is how many runs hold it.
	holders int
	// fairWaiters: two --fair runs wait for it while it is held.
	fairWaiters bool
	needs       func(opsStore) bool
}

var kindCases = []kindCase{
	{name: "plain", kind: "plain", holders: 1},
	{name: "fair", kind: "plain", run: []string{"--fair"}, holders: 1, fairWaiters: true, needs: func(s opsStore) bool { return s.fair }},
	{name: "shared", kind: "read-write", run: []string{"--shared"}, holders: 2},
	{name: "exclusive", kind: "read-write", run: []string{"--exclusive"}, holders: 1},
	{name: "semaphore", kind: "semaphore", run: []string{"--semaphore", "2"}, holders: 2, needs: func(s opsStore) bool { return s.semaphore }},
	{name: "reentrant", kind: "reentrant"},
}

// TestOperatorKinds: on every store, a key held in each lock kind it has
// reads "held" in status, with its kind and every holder; ls lists it
// with its kind; and unlock --force without --kind removes it, ending
// every holding "turnstile run" with exit 79 (lease lost). Two --fair
// runs waiting for a held lock count as its 2 waiters. Each store is one
// server (three Redis servers for Redlock; the fallback pair reuses the
// Redis and PostgreSQL ones), shared by its cases.
func TestOperatorKinds(t *testing.T) {
	// Fallback runs over the Redis and PostgreSQL servers of those
	// stores, under a prefix of its own on Redis.
	redisURL, pgURL := testserver.StartRedis(t).URL(), testserver.StartPostgres(t).URL()
	stores := []opsStore{
		{name: "redis", fair: true, semaphore: true, url: func(*testing.T) string { return redisURL }},
		{name: "etcd", fair: true, semaphore: true, url: func(t *testing.T) string { return testserver.StartEtcd(t).URL() }},
		{name: "zookeeper", fair: true, semaphore: true, url: func(t *testing.T) string { return "zookeeper://" + testserver.StartZooKeeper(t).Addr() }},
		{name: "postgres", semaphore: true, url: func(*testing.T) string { return pgURL }},
		{name: "mysql", semaphore: true, url: func(t *testing.T) string { return testserver.StartMySQL(t).URL() }},
		{name: "redlock", url: func(t *testing.T) string {
			var hosts []string
			for range 3 {
				hosts = append(hosts, testserver.StartRedis(t).Addr())
			}
			// Fresh servers hold no lock anyone could lose: no restart quarantine.
			return "redlock://" + strings.Join(hosts, ",") + "?quarantine=0&node_timeout=2s"
		}},
		{name: "fallback", semaphore: true, url: func(*testing.T) string {
			return "fallback://?primary=" + url.QueryEscape(redisURL+"?prefix=fb:") + "&secondary=" + url.QueryEscape(pgURL)
		}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			backend := s.url(t)
			for _, c := range kindCases {
				if c.needs != nil && !c.needs(s) {
					continue
				}
				t.Run(c.name, func(t *testing.T) { checkKindOps(t, backend, s.name, c) })
			}
			if !s.fair {
				r := runTurnstile(t, []string{"TURNSTILE_BACKEND=" + backend}, "status", "--kind", "fair", "k")
				if r.code != exitUsage || !strings.Contains(r.stderr, "no fair lock") {
					t.Errorf("status --kind fair on %s: exit %d, want %d saying it has no fair lock; stderr:\n%s", s.name, r.code, exitUsage, r.stderr)
				}
			}
		})
	}
}

// checkKindOps holds KEY in c's kind on the store at backend and runs
// status, ls and unlock --force on it.
func checkKindOps(t *testing.T, backend, store string, c kindCase) {
	env := []string{"TURNSTILE_BACKEND=" + backend}
	key := "ops:" + store + ":" + c.name
	// Renewed every 2 s: a holder on a loaded machine keeps its lease,
	// and learns of the unlock within 2 s.
	const ttl = 6 * time.Second

	var runs []*proc
	var lease *turnstile.Lease
	if c.run == nil && c.kind == "reentrant" {
		lease = holdReentrant(t, backend, key, ttl)
	} else {
		for range c.holders {
			dir := t.TempDir()
			args := append(append([]string{"run", "--key", key, "--ttl", ttl.String()}, c.run...), "--", "sh", "-c", holdScript)
			runs = append(runs, startTurnstile(t, append(env, "DIR="+dir), args...))
			waitForFile(t, filepath.Join(dir, "held"), time.Minute)
		}
	}
	if c.fairWaiters {
		dir := t.TempDir()
		for i, n := range []string{"A", "B"} {
			errPath := filepath.Join(dir, "err."+n)
			runs = append(runs, startLogged(t, env, errPath, "run", "--fair", "--key", key, "--ttl", ttl.String(), "--", "true"))
			waitForText(t, errPath, fmt.Sprintf("you are %s in line", []string{"1st", "2nd"}[i]), time.Minute)
		}
	}
	owners := c.holders
	if lease != nil {
		owners = 1
	}

	r := runTurnstile(t, env, "status", key)
	if r.code != exitOK || !strings.Contains(r.stdout, key+" is held\n") ||
		strings.Count(r.stdout, "  kind        "+c.kind+"\n") != owners || strings.Count(r.stdout, "  owner       ") != owners {
		t.Errorf("status: exit %d, want %s held in kind %s by %d owners; stdout:\n%s\nstderr:\n%s", r.code, key, c.kind, owners, r.stdout, r.stderr)
		logEnded(t, runs)
	}
	if lease != nil && !strings.Contains(r.stdout, "  owner       "+lease.Owner()+"\n") {
		t.Errorf("status does not name the holder %s:\n%s", lease.Owner(), r.stdout)
	}
	if c.fairWaiters && !strings.Contains(r.stdout, "  waiters     2\n") {
		t.Errorf("status with two --fair runs waiting does not count 2 waiters:\n%s", r.stdout)
	}

	r = runTurnstile(t, env, "ls", "--json", "--prefix", key)
	// The JSON's own fields, read as a script would.
	var list struct {
		Locks []struct {
			Key     string   `json:"key"`
			Held    bool     `json:"held"`
			Kinds   []string `json:"kinds"`
			Holders []struct {
				Kind string `json:"kind"`
			} `json:"holders"`
		} `json:"locks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != exitOK {
		t.Errorf("ls --json: exit %d, %v; stdout:\n%s\nstderr:\n%s", r.code, err, r.stdout, r.stderr)
	} else if len(list.Locks) != 1 || list.Locks[0].Key != key || !list.Locks[0].Held || strings.Join(list.Locks[0].Kinds, ",") != c.kind ||
		len(list.Locks[0].Holders) != owners || list.Locks[0].Holders[0].Kind != c.kind {
		t.Errorf("ls --json --prefix %s = %s; want %s held in kind %s by %d owners", key, r.stdout, key, c.kind, owners)
	}

	r = runTurnstile(t, env, "unlock", key, "--force", "--yes")
	if r.code != exitOK || !strings.Contains(r.stdout, "removed the lock on "+key+"\n  kind              "+c.kind+"\n") ||
		strings.Count(r.stdout, "  owner             ") != owners {
		t.Fatalf("unlock --force: exit %d, want the %s lock removed with its %d owners; stdout:\n%s\nstderr:\n%s", r.code, c.kind, owners, r.stdout, r.stderr)
	}
	for i, p := range runs {
		want := exitLeaseLost
		if i >= c.holders {
			want = 0 // a waiter: it takes the lock once the holder is gone, and runs
		}
		if res := p.wait(t, time.Minute); res.code != want {
			t.Errorf("run %d after the unlock: exit %d, want %d; stderr:\n%s", i, res.code, want, res.stderr)
		}
	}
	if lease != nil {
		select {
		case <-lease.Context().Done():
			if cause := context.Cause(lease.Context()); !errors.Is(cause, turnstile.ErrLockLost) {
				t.Errorf("the reentrant lease ended with %v, want ErrLockLost", cause)
			}
		case <-time.After(time.Minute):
			t.Error("the reentrant lease was not lost after the unlock")
		}
	}
	if r := runTurnstile(t, env, "status", "--held", key); r.code != exitFree {
		t.Errorf("status --held after the unlock: exit %d, want %d; stdout:\n%s", r.code, exitFree, r.stdout)
	}
}

// holdReentrant holds key's reentrant lock twice, through the library,
// for the rest of the test.
func holdReentrant(t *testing.T, backend, key string, ttl time.Duration) *turnstile.Lease {
	t.Helper()
	ctx := testserver.Ctx(t, 2*time.Minute)
	c, err := turnstile.Open(ctx, backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	v, err := turnstile.Reentrant(c.Backend())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := turnstile.New(v, turnstile.WithOwner("reentrant-holder-"+strings.ReplaceAll(key, ":", "-")), turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	var first *turnstile.Lease
	for range 2 {
		l, err := rc.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("reentrant lock of %s: %v", key, err)
		}
		if first == nil {
			first = l
		}
	}
	return first
}

// TestOperatorKindFlag: --kind narrows status, ls and unlock to one kind,
// by run's names for it; a key held in two kinds is shown in both, and
// unlock --force without --kind refuses it (exit 64) naming the kinds,
// removing nothing.
func TestOperatorKindFlag(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	env := []string{"TURNSTILE_BACKEND=" + srv.URL()}
	ctx := testserver.Ctx(t, 2*time.Minute)
	const key = "ops:both"

	c, err := turnstile.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	plain, err := c.Acquire(ctx, key, turnstile.WithTTL(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sem := startTurnstile(t, append(env, "DIR="+dir), "run", "--semaphore", "3", "--key", key, "--ttl", "6s", "--", "sh", "-c", holdScript)
	waitForFile(t, filepath.Join(dir, "held"), time.Minute)

	r := runTurnstile(t, env, "status", key)
	if r.code != exitOK || !strings.Contains(r.stdout, "  kind        plain\n  owner       "+plain.Owner()+"\n") ||
		!strings.Contains(r.stdout, "  kind        semaphore\n") {
		t.Errorf("status of a key held in two kinds: exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runTurnstile(t, env, "status", "--json", key)
	var st struct {
		Held  bool     `json:"held"`
		Kinds []string `json:"kinds"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Held || strings.Join(st.Kinds, ",") != "plain,semaphore" {
		t.Errorf("status --json = %s (%v); want held in plain and semaphore", r.stdout, err)
	}
	r = runTurnstile(t, env, "ls", "--prefix", key)
	if rows := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != exitOK || len(rows) != 3 ||
		!strings.HasPrefix(rows[0], "KEY") || !strings.Contains(rows[0], "KIND") ||
		!strings.Contains(rows[1], " plain ") || !strings.Contains(rows[2], " semaphore ") {
		t.Errorf("ls: exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	r = runTurnstile(t, env, "unlock", key, "--force", "--yes")
	if r.code != exitUsage || !strings.Contains(r.stderr, "plain and semaphore") || !strings.Contains(r.stderr, "--kind plain or --kind semaphore") || r.stdout != "" {
		t.Errorf("unlock --force of a key held in two kinds: exit %d, want %d naming both; stdout:\n%s\nstderr:\n%s", r.code, exitUsage, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		args []string
		want []string
		code int
	}{
		{[]string{"status", "--kind", "semaphore", key}, []string{key + " is held\n  kind        semaphore\n"}, exitOK},
		{[]string{"status", "--kind", "plain", key}, []string{key + " is held\n  kind        plain\n  owner       " + plain.Owner()}, exitOK},
		{[]string{"status", "--kind", "fair", key}, []string{"  kind        fair\n", "  waiters     0\n"}, exitOK},
		{[]string{"status", "--kind", "shared", key}, []string{key + " is free\n  kind        read-write\n"}, exitOK},
		{[]string{"status", "--kind", "exclusive", "--held", key}, []string{key + " is free\n  kind        read-write\n"}, exitFree},
		{[]string{"status", "--kind", "reentrant", key}, []string{key + " is free\n  kind        reentrant\n"}, exitOK},
		{[]string{"ls", "--kind", "semaphore", "--prefix", key}, []string{key + "  semaphore"}, exitOK},
		{[]string{"unlock", "--kind", "reentrant", "--force", "--yes", key}, nil, exitFree},
	} {
		r := runTurnstile(t, env, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%q: stdout does not say %q:\n%s\nstderr:\n%s", tc.args, w, r.stdout, r.stderr)
			}
		}
		if r.code != tc.code {
			t.Errorf("%q: exit %d, want %d; stderr:\n%s", tc.args, r.code, tc.code, r.stderr)
		}
		if tc.args[0] == "ls" && strings.Contains(r.stdout, "plain") {
			t.Errorf("ls --kind semaphore shows the plain lock:\n%s", r.stdout)
		}
	}

	r = runTurnstile(t, env, "unlock", "--kind", "semaphore", key, "--force", "--yes")
	if r.code != exitOK || !strings.Contains(r.stdout, "  kind              semaphore\n") {
		t.Fatalf("unlock --kind semaphore: exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if res := sem.wait(t, time.Minute); res.code != exitLeaseLost {
		t.Errorf("the semaphore's run after its unlock: exit %d, want %d; stderr:\n%s", res.code, exitLeaseLost, res.stderr)
	}
	if st, err := c.Inspect(ctx, key); err != nil || !st.Held || st.Holders[0].Owner != plain.Owner() {
		t.Errorf("the plain lock after the semaphore's unlock: %+v, %v; want still held", st, err)
	}
	// One kind is left: unlock finds it.
	r = runTurnstile(t, env, "unlock", key, "--force", "--yes")
	if r.code != exitOK || !strings.Contains(r.stdout, "  kind              plain\n  owner             "+plain.Owner()) {
		t.Errorf("unlock --force of the plain lock left: exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestOperatorKindsMySQLLeastPrivilege: an account granted the plain
// lock's table alone (docs/security/mysql.md) cannot see the kinds'
// holders, so status without --kind refuses to call a key free (exit 69
// with the permission hint and the way out); with --kind plain it shows
// the plain lock.
func TestOperatorKindsMySQLLeastPrivilege(t *testing.T) {
	t.Parallel()
	srv := testserver.StartMySQL(t)
	db := mysqlproc.Database
	if _, err := srv.Exec("CREATE USER 'plainonly'@'%' IDENTIFIED BY 'plain-pw'; GRANT CREATE, SELECT, INSERT, UPDATE ON " + db + ".turnstile_locks TO 'plainonly'@'%';"); err != nil {
		t.Fatal(err)
	}
	env := []string{"TURNSTILE_BACKEND=mysql://plainonly:plain-pw@" + srv.Addr() + "/" + db}
	r := runTurnstile(t, env, "status", "k")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "turnstile_holds") || !strings.Contains(r.stderr, "--kind plain looks at the plain lock alone") ||
		!strings.Contains(r.stderr, "hint:") || strings.Contains(r.stderr, "plain-pw") {
		t.Errorf("status without --kind as an account without the kinds' table: exit %d, want %d with the way out; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
	if r := runTurnstile(t, env, "status", "--kind", "plain", "k"); r.code != exitOK || !strings.Contains(r.stdout, "k is free") {
		t.Errorf("status --kind plain: exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// logEnded logs the runs that have ended already, and how.
func logEnded(t *testing.T, runs []*proc) {
	t.Helper()
	for i, p := range runs {
		select {
		case <-p.done:
			t.Logf("run %d ended already: exit %d; stderr:\n%s", i, p.code, p.stderr.String())
		default:
		}
	}
}

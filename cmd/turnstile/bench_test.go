//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// runBench runs "turnstile bench args..." in this process.
func runBench(t *testing.T, args ...string) dispatched {
	t.Helper()
	return runDispatch(t, append([]string{"bench"}, args...)...)
}

// benchTable is the cell rows of the text table, each a map from column
// header to value.
type benchTable map[string]map[string]string

// parseBenchTable reads the rows of the table at the top of stdout, up to
// the first empty line. Columns are separated by two spaces or more;
// headers such as "p50 ms" have one.
func parseBenchTable(t *testing.T, stdout string) benchTable {
	t.Helper()
	sep := regexp.MustCompile(`\s{2,}`)
	lines := strings.Split(stdout, "\n")
	header := sep.Split(strings.TrimSpace(lines[0]), -1)
	if len(header) < 3 || header[0] != "workload" || header[1] != "library" {
		t.Fatalf("no table header at the top of stdout:\n%s", stdout)
	}
	rows := benchTable{}
	for _, line := range lines[1:] {
		if strings.TrimSpace(line) == "" {
			break
		}
		fields := sep.Split(strings.TrimSpace(line), -1)
		if len(fields) != len(header) {
			t.Fatalf("row %q has %d columns, the header %d:\n%s", line, len(fields), len(header), stdout)
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = fields[i]
		}
		rows[fields[0]] = row
	}
	return rows
}

// number is a numeric column of a row, failing the test if missing.
func (tb benchTable) number(t *testing.T, id, column string) float64 {
	t.Helper()
	row, ok := tb[id]
	if !ok {
		t.Fatalf("the table has no row %s: %v", id, tb)
	}
	v, err := strconv.ParseFloat(row[column], 64)
	if err != nil {
		t.Fatalf("%s: column %q is %q, not a number", id, column, row[column])
	}
	return v
}

// leftoverLocks connects to the server at addr (database db) and returns
// the keys turnstile bench left that are not fencing-token keys, which
// expire by themselves; it fails the test if any key is outside the
// bench's prefix.
func leftoverLocks(t *testing.T, addr string, db int) []string {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, SelectDB: db, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys, err := c.Do(context.Background(), c.B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	var locks []string
	for _, k := range keys {
		if !strings.HasPrefix(k, "{bench:") {
			t.Errorf("key %q is outside {bench:...}", k)
		}
		if !strings.HasSuffix(k, "}:fence") {
			locks = append(locks, k)
		}
	}
	return locks
}

// The table names every cell with its figures, over a URL with a user,
// password and database; the keys stay under the bench's prefix and
// every lock is released.
func TestBenchTable(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	if _, err := srv.Do("ACL", "SETUSER", "bencher", "on", ">s3cret", "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(t.TempDir(), "report.html")
	// Cells of a second: 64 contending workers on a loaded machine have
	// taken no lock in a 200 ms cell.
	r := runBench(t, "--url", "redis://bencher:s3cret@"+srv.Addr()+"/2", "--duration", "1s",
		"--only", "uncontended/c=1$|contended-1", "--html", html)
	if r.code != exitOK {
		t.Fatalf("exit code %d, want 0; stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	tb := parseBenchTable(t, r.stdout)
	if len(tb) != 2 {
		t.Errorf("table has %d rows, want uncontended/c=1 and contended-1/c=64:\n%s", len(tb), r.stdout)
	}
	for _, id := range []string{"uncontended/c=1", "contended-1/c=64"} {
		if lib := tb[id]["library"]; lib != "turnstile" {
			t.Errorf("%s: library %q, want turnstile", id, lib)
		}
		if v := tb.number(t, id, "acq/s"); v <= 0 {
			t.Errorf("%s: %v acq/s, want more than 0", id, v)
		}
		if v := tb.number(t, id, "errors"); v != 0 {
			t.Errorf("%s: %v errors", id, v)
		}
	}
	// A plain lock and its release are one script each.
	if v := tb.number(t, "uncontended/c=1", "scripts/acq"); v < 1.9 || v > 2.2 {
		t.Errorf("uncontended/c=1: %v scripts per acquisition, want about 2", v)
	}
	// Handoffs between the workers of one client skip the acquire script.
	if v := tb.number(t, "contended-1/c=64", "scripts/acq"); v <= 0 || v > 4 {
		t.Errorf("contended-1/c=64: %v scripts per acquisition, want (0, 4]", v)
	}
	if !strings.Contains(r.stderr, "warning: this loads redis://bencher:xxxxx@") || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("stderr has no load warning with the password masked:\n%s", r.stderr)
	}
	if locks := leftoverLocks(t, srv.Addr(), 2); len(locks) > 0 {
		t.Errorf("locks left behind: %q", locks)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(page, []byte("<!DOCTYPE html>")) || !bytes.Contains(page, []byte("contended-1/c=64")) {
		t.Errorf("--html wrote no report of the cells:\n%.300s", page)
	}
}

// --json prints one workload.Result per cell and nothing else.
func TestBenchJSON(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	r := runBench(t, "--url", srv.URL(), "--duration", "1s", "--only", "contended-8|herd", "--waiters", "50", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d, want 0; stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines on stdout, want 2:\n%s", len(lines), r.stdout)
	}
	want := []string{"contended-8/c=64", "herd/c=50"}
	for i, line := range lines {
		var res workload.Result
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("line %d is not a workload.Result: %v\n%s", i+1, err, line)
		}
		if res.Kind != "cell" || res.Library != "turnstile" || res.ID != want[i] {
			t.Errorf("line %d: kind %q, library %q, id %q; want cell, turnstile, %s", i+1, res.Kind, res.Library, res.ID, want[i])
		}
		if res.Acquisitions == 0 || res.PerSecond <= 0 || res.CommandsPerAcq <= 0 || res.Errors != 0 {
			t.Errorf("%s: %d acquisitions, %v/s, %v commands each, %d errors", res.ID, res.Acquisitions, res.PerSecond, res.CommandsPerAcq, res.Errors)
		}
	}
}

// A redlock:// URL runs the Redlock cell over all its nodes and the
// single-node cells on its first; a redis:// URL skips the Redlock cell
// with a note.
func TestBenchRedlock(t *testing.T) {
	t.Parallel()
	var hosts []string
	for range 3 {
		hosts = append(hosts, testserver.StartRedis(t).Addr())
	}
	r := runBench(t, "--url", "redlock://"+strings.Join(hosts, ",")+"?quarantine=0&node_timeout=2s", "--duration", "200ms", "--only", "redlock|uncontended/c=1$")
	if r.code != exitOK {
		t.Fatalf("exit code %d, want 0; stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	tb := parseBenchTable(t, r.stdout)
	if v := tb.number(t, "redlock-3/c=64", "acq/s"); v <= 0 {
		t.Errorf("redlock-3/c=64: %v acq/s", v)
	}
	if v := tb.number(t, "uncontended/c=1", "scripts/acq"); v < 1.9 || v > 2.2 {
		t.Errorf("uncontended/c=1 on the first node: %v scripts per acquisition, want about 2", v)
	}

	r = runBench(t, "--url", "redis://"+hosts[0], "--duration", "200ms", "--only", "redlock|uncontended/c=1$")
	if r.code != exitOK {
		t.Fatalf("redis:// URL: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "redlock-5/c=64 skipped") {
		t.Errorf("stderr does not say the Redlock cell was skipped:\n%s", r.stderr)
	}
	if tb := parseBenchTable(t, r.stdout); len(tb) != 1 {
		t.Errorf("want only uncontended/c=1 in the table:\n%s", r.stdout)
	}
}

// Without --url it starts a redis-server of its own and stops it at the
// end.
func TestBenchOwnServer(t *testing.T) {
	t.Parallel()
	r := runBench(t, "--duration", "200ms", "--only", "uncontended/c=1$")
	if r.code != exitOK {
		t.Fatalf("exit code %d, want 0; stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	if v := parseBenchTable(t, r.stdout).number(t, "uncontended/c=1", "acq/s"); v <= 0 {
		t.Errorf("%v acq/s", v)
	}
	m := regexp.MustCompile(`redis-server on (127\.0\.0\.1:\d+), started for this run`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("stderr does not say which server it started:\n%s", r.stderr)
	}
	if conn, err := net.DialTimeout("tcp", m[1], time.Second); err == nil {
		conn.Close()
		t.Errorf("the server at %s still answers after the run", m[1])
	}
}

// Without --url and without redis-server it stops at once and says what
// to install or pass.
func TestBenchNoRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r := runBench(t, "--duration", "200ms")
	if r.code != exitUnavailable {
		t.Errorf("exit code %d, want %d", r.code, exitUnavailable)
	}
	for _, want := range []string{redisproc.InstallHint, "--url"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
}

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"negative duration", []string{"--duration", "-1s"}, "--duration -1s is outside"},
		{"zero duration", []string{"--duration", "0s"}, "--duration 0s is outside"},
		{"huge duration", []string{"--duration", "11m"}, "--duration 11m0s is outside"},
		{"duration without unit", []string{"--duration", "3"}, "want a duration such as"},
		{"bad regexp", []string{"--only", "("}, `--only "(" is not a regular expression`},
		{"regexp matching nothing", []string{"--only", "nothing"}, `--only "nothing" matches no workload; ids: uncontended/c=1`},
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"argument", []string{"redis://127.0.0.1:6379"}, `unexpected argument "redis://127.0.0.1:6379"`},
		{"too few waiters", []string{"--waiters", "1"}, "--waiters 1 is outside"},
		{"too many waiters", []string{"--waiters", "20001"}, "--waiters 20001 is outside"},
		{"zero hold", []string{"--hold", "0s"}, "--hold 0s is outside"},
		{"empty url", []string{"--url", ""}, "--url must not be empty"},
		{"other scheme", []string{"--url", "postgres://127.0.0.1/db"}, "want redis://HOST:PORT"},
		{"no scheme", []string{"--url", "127.0.0.1:6379"}, "want redis://HOST:PORT"},
		{"bad port", []string{"--url", "redis://127.0.0.1:99999"}, `port "99999" is not a number in [1, 65535]`},
		{"password stays hidden", []string{"--url", "mysql://u:hidden@h/db"}, "mysql://u:xxxxx@h/db"},
		{"unknown url parameter", []string{"--url", "redis://127.0.0.1:1?colour=red"}, "unknown query parameter"},
		{"redlock cell on redis", []string{"--url", "redis://127.0.0.1:1", "--only", "redlock"}, "it needs a Redlock"},
		{"html in a missing directory", []string{"--html", "/nonexistent/dir/report.html"}, "directory /nonexistent/dir does not exist"},
		{"empty html", []string{"--html", ""}, "--html must name a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBench(t, tt.args...)
			if r.code != exitUsage {
				t.Errorf("exit code %d, want %d (usage); stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr does not say %q:\n%s", tt.want, r.stderr)
			}
			if strings.Contains(r.stderr, "hidden") {
				t.Errorf("stderr shows the password:\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty on a usage error:\n%s", r.stdout)
			}
		})
	}
}

// A server that cannot be reached, or that refuses INFO, stops the run
// before any cell with exit 69 and says why.
func TestBenchUnavailable(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	if _, err := srv.Do("ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t, rueidisDelayDo) })
	tests := []struct {
		name string
		url  string
		want []string
	}{
		{"unreachable", "redis://127.0.0.1:1", []string{"cannot open the server", "connection refused"}},
		{"INFO refused", "redis://noinfo:pw@" + srv.Addr(), []string{"NOPERM", "INFO commandstats", "+info"}},
		{"wrong password", "redis://noinfo:wrong@" + srv.Addr(), []string{"WRONGPASS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBench(t, "--url", tt.url, "--duration", "200ms", "--only", "uncontended/c=1$")
			if r.code != exitUnavailable {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, exitUnavailable, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
		})
	}
}

// rueidisDelayDo is the topology refresh that a failed rueidis.NewClient
// leaves sleeping for up to a second, with no client that could stop it:
// the tests that open Redis wait for it as for a cluster client's timers.
const rueidisDelayDo = "rueidis.(*call).DelayDo.func"

func TestBenchHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help", "bench"}, {"bench", "-h"}, {"bench", "--duration", "1s", "--help"}} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), args, &stdout, &stderr); code != exitOK {
			t.Errorf("%q: exit code %d, want 0; stderr:\n%s", args, code, stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), "Usage: turnstile bench") {
			t.Errorf("%q: stdout is not the bench usage:\n%s", args, stdout.String())
		}
	}
	help := benchUsage()
	for _, want := range []string{
		"--url", "--only", "--duration", "--waiters", "--hold", "--json", "--html",
		"redis://", "rediss://", "redlock://", "{bench:", "Examples:", "+info",
		"64 ", "69 ", "128+N",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("bench help does not mention %q", want)
		}
	}
	for _, id := range (&benchOptions{waiters: defaultBenchWaiters, hold: time.Millisecond}).ids() {
		name, _, _ := strings.Cut(id, "/")
		if !strings.Contains(help, name) {
			t.Errorf("bench help does not list workload %s", id)
		}
	}
	var usage bytes.Buffer
	printUsage(&usage)
	if !strings.Contains(usage.String(), "  bench ") {
		t.Errorf("the command list has no bench:\n%s", usage.String())
	}
}

// The URL of each node carries the URL's user, password, database and
// TLS, so that counting commands works where locking does.
func TestBenchCounterAddrs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url          string
		single       string
		singleAddrs  []string
		redlockAddrs []string
	}{
		{"redis://127.0.0.1:7000", "redis://127.0.0.1:7000", []string{"redis://127.0.0.1:7000"}, nil},
		{"redis://", "redis://", []string{"redis://localhost:6379"}, nil},
		{"rediss://u:p@h:7000/3?prefix=app:", "rediss://u:p@h:7000/3?prefix=app:", []string{"rediss://u:p@h:7000/3"}, nil},
		{"redis://h1:7000,h2:7001", "redis://h1:7000,h2:7001", []string{"redis://h1:7000", "redis://h2:7001"}, nil},
		{"redlock://u:p@h1,h2:7001/1?prefix=x:&quarantine=1m", "redis://u:p@h1:6379/1?prefix=x%3A",
			[]string{"redis://u:p@h1:6379/1"}, []string{"redis://u:p@h1:6379/1", "redis://u:p@h2:7001/1"}},
		{"redlock://h1:7000", "redis://h1:7000", []string{"redis://h1:7000"}, nil},
		{"redlock://h1:7000,h2:7001?flush_delay=0&node_timeout=9ms", "redis://h1:7000?flush_delay=0",
			[]string{"redis://h1:7000"}, []string{"redis://h1:7000", "redis://h2:7001"}},
	}
	for _, tt := range tests {
		got, err := parseBenchURL(tt.url, "--url")
		if err != nil {
			t.Errorf("%s: %v", tt.url, err)
			continue
		}
		if got.single != tt.single || !equalStrings(got.singleAddrs, tt.singleAddrs) || !equalStrings(got.redlockAddrs, tt.redlockAddrs) {
			t.Errorf("%s: single %q %q, redlock nodes %q; want %q %q, %q", tt.url, got.single, got.singleAddrs, got.redlockAddrs, tt.single, tt.singleAddrs, tt.redlockAddrs)
		}
		if (got.redlock != "") != (len(tt.redlockAddrs) > 0) {
			t.Errorf("%s: redlock URL %q", tt.url, got.redlock)
		}
		if want := strings.Replace(tt.url, ":p@", ":xxxxx@", 1); got.name != want {
			t.Errorf("%s: named %q", tt.url, got.name)
		}
	}
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, " ") == strings.Join(b, " ")
}

// A redis:// URL of several hosts is one Redis Cluster: the cells lock
// through the cluster and count commands on every host listed.
func TestBenchCluster(t *testing.T) {
	t.Parallel()
	cl := testserver.StartRedisCluster(t)
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t, rueidisDelayDo) })
	r := runBench(t, "--url", "redis://"+strings.Join(cl.Addrs(), ","), "--duration", "200ms", "--only", "uncontended/c=16$", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d, want 0; stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	var res workload.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("stdout is not one workload.Result: %v\n%s", err, r.stdout)
	}
	if res.Nodes != testserver.ClusterMasters || res.Acquisitions == 0 {
		t.Errorf("%d nodes, %d acquisitions; want %d nodes and some", res.Nodes, res.Acquisitions, testserver.ClusterMasters)
	}
	// Every pair's two scripts run on the master of its key's slot, one
	// of the hosts counted; besides, each of the 16 workers may end the
	// cell with an acquisition its end cut short, and its release: few
	// acquisitions on a busy machine make those count.
	acq := float64(res.Acquisitions)
	if scripts := res.ScriptsPerAcq * acq; scripts < 1.9*acq || scripts > 2*acq+2*16+1 {
		t.Errorf("%v scripts per acquisition over the cluster (%d acquisitions), want about 2", res.ScriptsPerAcq, res.Acquisitions)
	}
}

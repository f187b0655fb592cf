package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

type adviseResult struct {
	code           int
	stdout, stderr string
}

func runAdvise(t *testing.T, args ...string) adviseResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := dispatch(ctx, append([]string{"advise"}, args...), &stdout, &stderr)
	return adviseResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// adviseJSON runs "turnstile advise --json" with args and decodes its
// output, refusing any field advice does not have.
func adviseJSON(t *testing.T, args ...string) advice {
	t.Helper()
	r := runAdvise(t, append(args, "--json")...)
	if r.code != exitOK {
		t.Fatalf("advise %q: exit code %d, want 0; stderr:\n%s", args, r.code, r.stderr)
	}
	var a advice
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("advise %q: output is not an advice: %v\n%s", args, err, r.stdout)
	}
	return a
}

// Every row of the load table in docs/backends.md is reachable, and each
// recommendation says why, names a runner-up and why not, and gives a
// preset of the right phase and the alerts that apply.
func TestAdviseRows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		row       string
		why       string // in one of the reasons
		runnerUp  string
		phase     int
		url       string // prefix of the preset URL
		alerts    []string
		notAlerts []string
	}{
		{"mutex by rate", []string{"--rate", "50"}, rowMutex, "≤ 100", rowDB, 0, "mem://", nil, []string{"TurnstileRenewalFailures"}},
		{"database by rate", []string{"--rate", "800", "--stores", "postgres"}, rowDB, "≤ 1,000", rowRedis, 0, "postgres://", []string{"TurnstileRenewalFailures"}, []string{"TurnstileRedlockQuorumLow"}},
		{"database, MySQL", []string{"--rate", "800", "--stores", "mariadb"}, rowDB, "≤ 1,000", rowRedis, 0, "mysql://", nil, nil},
		{"redis by rate", []string{"--rate", "5000"}, rowRedis, "≤ 10,000", rowRedlock, 1, "redis://", []string{"TurnstileForcedExpiries"}, []string{"TurnstileRenewalFailures", "TurnstileRedlockQuorumLow"}},
		{"redis, no database run", []string{"--rate", "800", "--stores", "redis"}, rowRedis, "no PostgreSQL or MySQL", rowDB, 1, "redis://", nil, nil},
		{"redlock by rate", []string{"--rate", "30k"}, rowRedlock, "10,000–100,000", rowRedis, 2, "redlock://", []string{"TurnstileRedlockQuorumLow", "TurnstileRenewalFailures"}, []string{"TurnstileBreakerOpen"}},
		{"redlock for money", []string{"--rate", "5000", "--safety", "money", "--stores", "redis"}, rowRedlock, "failover", rowConsensus, 3, "redlock://", []string{"TurnstileRedlockQuorumLow"}, nil},
		{"phase 4", []string{"--rate", "30k", "--hold", "20ms", "--safety", "money", "--stores", "redis,postgres,kafka"}, rowRedlock, "fencing is mandatory", rowConsensus, 4, "fallback://?primary=redlock://", []string{"TurnstileBreakerOpen", "TurnstileRedlockQuorumLow"}, nil},
		{"consensus for money", []string{"--rate", "3000", "--safety", "money", "--stores", "redis,etcd"}, rowConsensus, "consensus store", rowRedlock, 0, "etcd://", nil, []string{"TurnstileRedlockQuorumLow"}},
		{"consensus, the only store run", []string{"--rate", "2000", "--stores", "zk"}, rowConsensus, "no Redis", rowRedlock, 0, "zookeeper://", nil, nil},
		{"lock-free by rate", []string{"--rate", "200k"}, rowLockFree, "100,000", rowRedlock, 0, "postgres://", []string{"TurnstileAcquireRetriesHigh"}, nil},
		{"lock-free for a hot key", []string{"--rate", "2000", "--hot-key-share", "50%", "--hold", "5ms", "--stores", "redis"}, rowLockFree, "hottest key", rowRedlock, 0, "redis://", nil, nil},
		{"lock-free stock", []string{"--rate", "500", "--operation", "stock-decrement", "--stores", "postgres"}, rowLockFree, "atomic step", rowDB, 0, "postgres://", nil, []string{"TurnstileAcquireLatencyP50High"}},
		{"payment", []string{"--rate", "800", "--operation", "payment", "--stores", "postgres,redis"}, rowDB, "idempotency key", rowRedis, 0, "postgres://", nil, nil},
		{"lock-free job queue", []string{"--rate", "150k", "--operation", "job", "--stores", "mysql,redis"}, rowLockFree, "MySQLJobs", rowRedlock, 0, "mysql://", nil, nil},
	}
	alertsFile, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	reached := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := adviseJSON(t, tt.args...)
			r := a.Recommendation
			if r.Row != tt.row {
				t.Fatalf("row %q, want %q; reasons: %q", r.Row, tt.row, r.Reasons)
			}
			reached[r.Row] = true
			if r.Choice != tableRows[tt.row].choice || r.Load == "" || r.Turnstile == "" {
				t.Errorf("recommendation %+v does not repeat the table's row", r)
			}
			if !slices.ContainsFunc(r.Reasons, func(s string) bool { return strings.Contains(s, tt.why) }) {
				t.Errorf("no reason says %q: %q", tt.why, r.Reasons)
			}
			if u := a.RunnerUp; u.Row != tt.runnerUp || len(u.Reasons) == 0 || u.Row == r.Row {
				t.Errorf("runner-up %q (why not: %q), want %q with reasons", u.Row, u.Reasons, tt.runnerUp)
			}
			if a.Preset.Phase != tt.phase || !strings.HasPrefix(a.Preset.URL, tt.url) || a.Preset.Name == "" {
				t.Errorf("preset phase %d %q (%s), want phase %d, %s...", a.Preset.Phase, a.Preset.URL, a.Preset.Name, tt.phase, tt.url)
			}
			names := []string{}
			for _, al := range a.Alerts {
				names = append(names, al.Name)
				if !bytes.Contains(alertsFile, []byte("alert: "+al.Name+"\n")) || al.Why == "" {
					t.Errorf("alert %q (%q) is not in deploy/prometheus/alerts.yml or says not why", al.Name, al.Why)
				}
			}
			for _, n := range tt.alerts {
				if !slices.Contains(names, n) {
					t.Errorf("alerts %q lack %s", names, n)
				}
			}
			for _, n := range tt.notAlerts {
				if slices.Contains(names, n) {
					t.Errorf("alerts %q include %s, which does not apply", names, n)
				}
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		for row := range tableRows {
			if !reached[row] {
				t.Errorf("no input reaches the row %q", row)
			}
		}
	})
}

// The capacity follows the documented costs: a load's server cores are
// its rate times the CPU of an acquisition, and the servers are enough to
// carry it at the headroom.
func TestAdviseCapacity(t *testing.T) {
	t.Parallel()
	a := adviseJSON(t, "--rate", "8000", "--hold", "10ms")
	k := a.Capacity
	if k.Source != "documented" || k.Store != "redis" || k.ServerCPUMicrosPerAcq != docRedisCPU || k.Nodes != 1 || !k.Fits {
		t.Errorf("capacity %+v, want documented redis, %v µs, 1 node", k, docRedisCPU)
	}
	if want := 8000 * docRedisCPU / 1e6; !near(k.StoreCores, want) || !near(k.LocksHeld, 80) {
		t.Errorf("%v cores and %v locks held, want %v and 80", k.StoreCores, k.LocksHeld, want)
	}

	// The article's 100,000/s on a Redlock of 5: one Redlock's nodes each
	// spend a fifth of the pair's cost, so the load needs several.
	a = adviseJSON(t, "--rate", "99999", "--safety", "money", "--stores", "redis")
	k = a.Capacity
	perGroup := headroom * 1e6 / (docRedlockCPU / docRedlockNodes)
	if k.Store != "redlock-5" || !near(k.PerGroupRate, perGroup) || k.Groups != 4 || k.Nodes != 20 || k.Fits {
		t.Errorf("capacity %+v, want redlock-5, %.0f/s per Redlock, 4 Redlocks of 5", k, perGroup)
	}
	if !slices.ContainsFunc(a.Notes, func(s string) bool { return strings.Contains(s, "partitioning the keys") }) {
		t.Errorf("notes %q do not say that several Redlocks partition the keys", a.Notes)
	}

	// Holds past a third of the TTL are renewed; a hot key has its limit.
	k = adviseJSON(t, "--rate", "100", "--hold", "20s", "--stores", "redis", "--hot-key-share", "0.01").Capacity
	if !near(k.RenewalsPerSecond, 100*20/10) || !near(k.HotKeyRate, 1) || k.HotKeyLimit <= 0 || k.HotKeyLimit > 0.05 {
		t.Errorf("renewals %v/s, hot key %v/s of at most %v/s; want 200/s, 1/s of under 0.05/s", k.RenewalsPerSecond, k.HotKeyRate, k.HotKeyLimit)
	}
}

func near(got, want float64) bool { return got >= want*0.999 && got <= want*1.001 }

// --json is one object whose field names are those documented in
// docs/cli.md; they do not change.
func TestAdviseJSONStable(t *testing.T) {
	t.Parallel()
	r := runAdvise(t, "--rate", "30k", "--safety", "money", "--stores", "redis,postgres,kafka", "--hot-key-share", "2%", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	want := map[string][]string{
		"":               {"alerts", "capacity", "input", "notes", "preset", "recommendation", "runner_up"},
		"input":          {"hold_us", "hot_key_share", "operation", "rate", "safety", "stores"},
		"recommendation": {"choice", "load", "reasons", "row", "turnstile"},
		"runner_up":      {"choice", "load", "reasons", "row", "turnstile"},
		"preset":         {"also", "name", "options", "phase", "url"},
		"capacity": {"acquire_us", "fits", "groups", "headroom", "hot_key_limit", "hot_key_rate", "in_flight", "locks_held", "nodes",
			"per_group_rate", "renewals_per_s", "round_trip_us", "server_cpu_us_per_acq", "source", "store", "store_cores"},
		"alerts": {"name", "why"},
	}
	keys := func(v any) []string {
		if l, ok := v.([]any); ok && len(l) > 0 {
			v = l[0]
		}
		o, _ := v.(map[string]any)
		return slices.Sorted(maps.Keys(o))
	}
	for obj, fields := range want {
		v := any(m)
		if obj != "" {
			v = m[obj]
		}
		if got := keys(v); !slices.Equal(got, fields) {
			t.Errorf("%q has fields %q, want %q", obj, got, fields)
		}
	}
	// The documentation lists the same fields.
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for obj, fields := range want {
		for _, f := range append(fields, obj) {
			if f != "" && !bytes.Contains(doc, []byte("`"+f+"`")) {
				t.Errorf("docs/cli.md does not document the field %q of %q", f, obj)
			}
		}
	}
}

// The table for people names the recommendation, the runner-up, the
// preset, the capacity and the alerts.
func TestAdviseTable(t *testing.T) {
	t.Parallel()
	r := runAdvise(t, "--rate", "20000", "--hold", "30ms")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"recommendation  Redlock over 5 nodes + fencing", "runner-up", "why not", "phase 2: 3-node Redlock",
		"redlock://redis1:6379,redis2:6379,redis3:6379?fencing=off", "capacity", "server CPU", "TurnstileRedlockQuorumLow",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, r.stdout)
		}
	}
}

// Every bad input is a usage error (64) that says what is wrong.
func TestAdviseUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no rate", nil, "--rate is required"},
		{"empty rate", []string{"--rate", ""}, `--rate "": want acquisitions per second`},
		{"negative rate", []string{"--rate", "-5"}, `--rate "-5": want acquisitions per second`},
		{"zero rate", []string{"--rate", "0"}, "want a rate above 0"},
		{"huge rate", []string{"--rate", "2000M"}, "at most 1000000000"},
		{"rate in words", []string{"--rate", "lots"}, `--rate "lots"`},
		{"rate as hex", []string{"--rate", "0x10"}, `--rate "0x10"`},
		{"rate not a number", []string{"--rate", "NaN"}, `--rate "NaN"`},
		{"zero hold", []string{"--rate", "10", "--hold", "0s"}, "--hold 0s is outside"},
		{"long hold", []string{"--rate", "10", "--hold", "2h"}, "--hold 2h0m0s is outside"},
		{"hold without unit", []string{"--rate", "10", "--hold", "50"}, "want a duration such as"},
		{"share above one", []string{"--rate", "10", "--hot-key-share", "1.5"}, "between 0 and 1"},
		{"share in percent above 100", []string{"--rate", "10", "--hot-key-share", "150%"}, "between 0 and 1"},
		{"share not a number", []string{"--rate", "10", "--hot-key-share", "half"}, `--hot-key-share "half"`},
		{"share infinite", []string{"--rate", "10", "--hot-key-share", "Inf"}, `--hot-key-share "Inf"`},
		{"safety", []string{"--rate", "10", "--safety", "high"}, `--safety "high": want money`},
		{"operation", []string{"--rate", "10", "--operation", "refund"}, `--operation "refund": want one of generic, stock-decrement, payment, job`},
		{"unknown store", []string{"--rate", "10", "--stores", "redis,cassandra"}, `unknown store "cassandra"`},
		{"empty stores", []string{"--rate", "10", "--stores", ""}, "name the stores you run"},
		{"empty store", []string{"--rate", "10", "--stores", "redis,,etcd"}, "an empty name between commas"},
		{"duration without backend", []string{"--rate", "10", "--duration", "1s"}, "give --backend too"},
		{"zero duration", []string{"--rate", "10", "--backend", "redis://127.0.0.1:1", "--duration", "0s"}, "--duration 0s is outside"},
		{"empty backend", []string{"--rate", "10", "--backend", ""}, "--backend must not be empty"},
		{"backend not measurable", []string{"--rate", "10", "--backend", "postgres://u:hidden@127.0.0.1/db"}, "postgres://u:xxxxx@127.0.0.1/db: want redis://"},
		{"backend with a bad port", []string{"--rate", "10", "--backend", "redis://127.0.0.1:99999"}, `port "99999"`},
		{"argument", []string{"--rate", "10", "redis"}, `unexpected argument "redis"`},
		{"unknown flag", []string{"--rate", "10", "--nodes", "3"}, "flag provided but not defined: -nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAdvise(t, tt.args...)
			if r.code != exitUsage {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, "hidden") || r.stdout != "" {
				t.Errorf("stderr %q, want it to contain %q (and no password, nothing on stdout)", r.stderr, tt.want)
			}
		})
	}
}

// An unreachable --backend is exit 69, said at once.
func TestAdviseUnreachable(t *testing.T) {
	t.Parallel()
	r := runAdvise(t, "--rate", "100", "--backend", "redis://127.0.0.1:1", "--duration", "1s")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "cannot open the server") {
		t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
}

// With --backend, advise measures the server as "turnstile bench" does:
// its capacity figures agree with bench's measurement of the same server
// in the same test (as a ratio, the machine being shared).
func TestAdviseMeasured(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	b := runBench(t, "--backend", srv.URL(), "--only", "^uncontended/c=64$", "--duration", "700ms", "--json")
	if b.code != exitOK {
		t.Fatalf("bench: exit code %d; stderr:\n%s", b.code, b.stderr)
	}
	var cell workload.Result
	if err := json.Unmarshal([]byte(b.stdout), &cell); err != nil || cell.ServerCPUMicrosPerAcq <= 0 {
		t.Fatalf("bench: %v, server CPU %v µs per acquisition\n%s", err, cell.ServerCPUMicrosPerAcq, b.stdout)
	}

	const rate = 8000
	r := runAdvise(t, "--rate", "8k", "--hold", "1ms", "--backend", srv.URL(), "--duration", "700ms", "--json")
	if r.code != exitOK {
		t.Fatalf("advise: exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "uncontended/c=64") || !strings.Contains(r.stderr, "measuring redis-server") && !strings.Contains(r.stderr, "measuring redis://") {
		t.Errorf("stderr does not say what it measures:\n%s", r.stderr)
	}
	var a advice
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatalf("advise: %v\n%s", err, r.stdout)
	}
	k := a.Capacity
	if k.Source != "measured" || k.Store != "redis" || k.RoundTripMicros <= 0 || k.Nodes != 1 {
		t.Fatalf("capacity %+v, want measured on redis, a round trip, one node", k)
	}
	ratio := k.ServerCPUMicrosPerAcq / cell.ServerCPUMicrosPerAcq
	t.Logf("server CPU per acquisition: advise %.1f µs, bench %.1f µs (ratio %.2f); round trip %.0f µs",
		k.ServerCPUMicrosPerAcq, cell.ServerCPUMicrosPerAcq, ratio, k.RoundTripMicros)
	if ratio < 0.25 || ratio > 4 {
		t.Errorf("advise measured %.1f µs per acquisition, bench %.1f µs: not the same server cost", k.ServerCPUMicrosPerAcq, cell.ServerCPUMicrosPerAcq)
	}
	if cores := rate * cell.ServerCPUMicrosPerAcq / 1e6; k.StoreCores < cores/4 || k.StoreCores > cores*4 {
		t.Errorf("advise says %.3f cores for %d/s; bench's cost gives %.3f", k.StoreCores, rate, cores)
	}
	if !near(k.StoreCores, rate*k.ServerCPUMicrosPerAcq/1e6) {
		t.Errorf("%.3f cores is not the rate times %.1f µs", k.StoreCores, k.ServerCPUMicrosPerAcq)
	}
}

// The help lists every flag, as completion reads them.
func TestAdviseHelp(t *testing.T) {
	t.Parallel()
	r := runAdvise(t, "-h")
	if r.code != exitOK {
		t.Fatalf("exit code %d", r.code)
	}
	flags := regexp.MustCompile(`(?m)^ {2,4}(--[a-z][a-z0-9-]*)`).FindAllStringSubmatch(r.stdout, -1)
	var got []string
	for _, f := range flags {
		got = append(got, f[1])
	}
	for _, want := range []string{"--rate", "--hold", "--hot-key-share", "--safety", "--operation", "--stores", "--backend", "--backend-file", "--duration", "--json"} {
		if !slices.Contains(got, want) {
			t.Errorf("help lists %q, not %s", got, want)
		}
	}
}

// --rate reads the ways people write a rate, and nothing ambiguous.
func TestAdviseRateSyntax(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{
		"800": 800, "20000": 20000, "20_000": 20000, "1,500": 1500, "1,000,000": 1e6, "100k": 1e5, "100K/s": 1e5,
		"1.5M": 1.5e6, "0.5": 0.5, " 42 ": 42, "2500/s": 2500,
	} {
		if got, err := parseAdviseRate(in); err != nil || got != want {
			t.Errorf("parseAdviseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1,5", "1,50", "12,34,567", "1_0", "1e5", "0x10", "1.", ".5", "+5", "5 k", "5kk", "5/min", "1,000.5.5", "1m"} {
		if got, err := parseAdviseRate(in); err == nil {
			t.Errorf("parseAdviseRate(%q) = %v, want an error", in, got)
		}
	}
}

// A measured Redlock's cost sizes the Redlock presets by its own node
// count; a measured single server's cost is scaled for a Redlock.
func TestAdviseMeasuredCostSizes(t *testing.T) {
	t.Parallel()
	in, err := parseAdvise([]string{"--rate", "60k", "--safety", "money", "--stores", "redis"})
	if err != nil {
		t.Fatal(err)
	}
	k := advise(in, cost{source: "measured", redisCPU: 10, redlockCPU: 60, redlockN: 3, roundTrip: 100}).Capacity
	perGroup := headroom * 1e6 / 20
	if k.Source != "measured" || k.Store != "redlock-3" || k.ServerCPUMicrosPerAcq != 60 || !near(k.PerGroupRate, perGroup) || k.Groups != 2 || k.Nodes != 6 {
		t.Errorf("capacity %+v, want measured redlock-3, 60 µs, %.0f/s per Redlock, 2 Redlocks of 3", k, perGroup)
	}
	if !near(k.StoreCores, 60000*60/1e6) || !near(k.InFlight, 60000*(50000+200)/1e6) {
		t.Errorf("%v cores, %v in flight", k.StoreCores, k.InFlight)
	}
}

// Without --stores any store may be deployed (null in --json); --stores
// none says the team runs none yet ([]), and the advice says to deploy.
func TestAdviseStoresNone(t *testing.T) {
	t.Parallel()
	if a := adviseJSON(t, "--rate", "800"); a.Input.Stores != nil {
		t.Errorf("stores %q without --stores, want null", a.Input.Stores)
	}
	a := adviseJSON(t, "--rate", "800", "--stores", "none")
	if a.Input.Stores == nil || len(a.Input.Stores) != 0 {
		t.Errorf("stores %q for --stores none, want []", a.Input.Stores)
	}
	if !slices.ContainsFunc(a.Recommendation.Reasons, func(s string) bool { return strings.Contains(s, "deploy PostgreSQL or MySQL") }) {
		t.Errorf("reasons %q do not say what to deploy", a.Recommendation.Reasons)
	}
	if r := runAdvise(t, "--rate", "800", "--stores", "none"); !strings.Contains(r.stdout, "stores none yet") {
		t.Errorf("the table does not say that no store runs:\n%s", r.stdout)
	}
}

// A redlock:// --backend is measured over its nodes too: the Redlock
// presets are sized from its own cost, named after its node count.
func TestAdviseMeasuredRedlock(t *testing.T) {
	t.Parallel()
	var hosts []string
	for range 3 {
		hosts = append(hosts, testserver.StartRedis(t).Addr())
	}
	// Fresh servers hold no lock anyone could lose: no restart quarantine.
	u := "redlock://" + strings.Join(hosts, ",") + "?quarantine=0&node_timeout=500ms"
	r := runAdvise(t, "--rate", "30k", "--backend", u, "--duration", "500ms", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "redlock-3/c=64") {
		t.Errorf("stderr does not show the Redlock cell:\n%s", r.stderr)
	}
	var a advice
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatal(err)
	}
	k := a.Capacity
	t.Logf("Redlock of 3: %.1f µs server CPU per acquisition, %.0f/s per Redlock", k.ServerCPUMicrosPerAcq, k.PerGroupRate)
	if a.Preset.Phase != 2 || k.Source != "measured" || k.Store != "redlock-3" || k.ServerCPUMicrosPerAcq <= 0 || k.Nodes%3 != 0 || k.Nodes == 0 {
		t.Errorf("phase %d, capacity %+v; want phase 2 sized from the measured Redlock of 3", a.Preset.Phase, k)
	}
}

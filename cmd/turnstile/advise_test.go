package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// runAdvise runs "turnstile advise args..." in this process.
func runAdvise(t *testing.T, args ...string) dispatched {
	t.Helper()
	return runDispatch(t, append([]string{"advise"}, args...)...)
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
		{"money with Kafka, no fallback that fits", []string{"--rate", "30k", "--hold", "20ms", "--safety", "money", "--stores", "redis,postgres,kafka"}, rowRedlock, "fencing is mandatory", rowConsensus, 3, "redlock://", []string{"TurnstileRedlockQuorumLow"}, []string{"TurnstileBreakerOpen"}},
		{"consensus for money", []string{"--rate", "3000", "--safety", "money", "--stores", "redis,etcd"}, rowConsensus, "consensus store", rowRedlock, 0, "etcd://", nil, []string{"TurnstileRedlockQuorumLow"}},
		{"consensus, the only store run", []string{"--rate", "2000", "--stores", "zk"}, rowConsensus, "no Redis", rowRedlock, 0, "zookeeper://", nil, nil},
		{"lock-free by rate", []string{"--rate", "200k"}, rowLockFree, "100,000", rowRedlock, 0, "redis://", []string{"TurnstileAcquireRetriesHigh"}, nil},
		{"lock-free by rate, a database only", []string{"--rate", "200k", "--stores", "postgres"}, rowLockFree, "100,000", rowRedlock, 0, "postgres://", nil, nil},
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
			if r.Choice != strings.ReplaceAll(tableRows[tt.row].choice, "`", "") || r.Load != tableRows[tt.row].load || r.Turnstile == "" {
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
// its requests times the CPU of one, and the servers are enough to carry
// it at the headroom.
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

	// The table's 100,000/s on Redlocks of 5: one Redlock's nodes each
	// spend a fifth of the pair's cost, so the load needs several, and
	// the preset names every one of them.
	a = adviseJSON(t, "--rate", "99999", "--safety", "money", "--stores", "redis")
	k = a.Capacity
	perGroup := headroom * 1e6 / (docRedlockCPU / docRedlockNodes)
	groups := int(math.Ceil(99999 / perGroup))
	if groups < 2 {
		t.Fatalf("%.0f/s per Redlock: the table's 100,000/s fits one, and this case tests none of the partitioning", perGroup)
	}
	if k.Store != "redlock-5" || !near(k.PerGroupRate, perGroup) || k.Groups != groups || k.Nodes != 5*groups || !k.Fits {
		t.Errorf("capacity %+v, want redlock-5, %.0f/s per Redlock, %d Redlocks of 5 that carry it", k, perGroup, groups)
	}
	last := "redis" + strconv.Itoa(5*groups) + ":6379"
	if len(a.Preset.URLs) != groups || !strings.Contains(a.Preset.URLs[groups-1], last) ||
		!slices.ContainsFunc(a.Preset.Also, func(s string) bool { return strings.Contains(s, "opens the "+strconv.Itoa(groups)+" URLs") }) {
		t.Errorf("preset %+v does not partition the keys between %d Redlocks", a.Preset, groups)
	}

	// Holds past a third of the TTL are renewed, and the renewals are
	// requests to the store.
	k = adviseJSON(t, "--rate", "100", "--hold", "20s", "--stores", "postgres").Capacity
	if !near(k.RenewalsPerSecond, 100*20/10) || !near(k.RequestsPerSecond, 300) || k.Store != "postgres" || !k.Fits {
		t.Errorf("capacity %+v, want 200 renewals/s of 300 requests/s on PostgreSQL", k)
	}
	// A hot key has its limit.
	k = adviseJSON(t, "--rate", "100", "--hold", "2s", "--stores", "redis", "--hot-key-share", "0.001").Capacity
	if !near(k.HotKeyRate, 0.1) || !near(k.HotKeyLimit, 1e6/(2e6+handoffRoundTrips*docRoundTrip)) {
		t.Errorf("hot key %v/s of at most %v/s; want 0.1/s of under 0.5/s", k.HotKeyRate, k.HotKeyLimit)
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
		"preset":         {"also", "name", "options", "phase", "url", "urls"},
		"capacity": {"acquire_us", "busiest_group_rate", "failover", "fits", "groups", "headroom", "hot_key_limit", "hot_key_rate", "in_flight", "locks_held", "nodes",
			"per_group_rate", "renewals_per_s", "requests_per_s", "round_trip_us", "server_cpu_us_per_acq", "source", "store", "store_cores"},
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
		{"zero rate", []string{"--rate", "0"}, "want a rate of at least 0.001"},
		{"rate below the least", []string{"--rate", "0.000_1"}, "want a rate of at least 0.001"},
		{"rate with a sign", []string{"--rate", "+5"}, `--rate "+5": want acquisitions per second`},
		{"rate with an exponent", []string{"--rate", "1e5"}, `--rate "1e5"`},
		{"rate with a stray underscore", []string{"--rate", "1__0"}, `--rate "1__0"`},
		{"share with an exponent", []string{"--rate", "10", "--hot-key-share", "5e-2"}, `--hot-key-share "5e-2"`},
		{"hold with a stray underscore", []string{"--rate", "10", "--hold", "_5ms"}, "an underscore only between two digits"},
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

//go:build linux

package demo

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// demoRun is one JSON line of "turnstile demo --json".
type demoRun map[string]any

// parseDemoJSON checks that every stdout line is a JSON object with
// scenario, variant and ok, and returns them.
func parseDemoJSON(t *testing.T, stdout string) []demoRun {
	t.Helper()
	var runs []demoRun
	for i, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r demoRun
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("stdout line %d is not a JSON object: %v\n%s", i+1, err, line)
		}
		for _, k := range []string{"scenario", "variant", "ok", "naive", "summary"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("stdout line %d has no %q: %s", i+1, k, line)
			}
		}
		if _, ok := r["ok"].(bool); !ok {
			t.Fatalf("stdout line %d: ok is not a boolean: %s", i+1, line)
		}
		runs = append(runs, r)
	}
	return runs
}

// find returns the run of scenario/variant, failing the test if missing.
func find(t *testing.T, runs []demoRun, scenario, variant string) demoRun {
	t.Helper()
	for _, r := range runs {
		if r["scenario"] == scenario && r["variant"] == variant {
			return r
		}
	}
	t.Fatalf("no run of %s/%s in the output", scenario, variant)
	return nil
}

func number(t *testing.T, r demoRun, name string) float64 {
	t.Helper()
	v, ok := r[name].(float64)
	if !ok {
		t.Fatalf("%s/%s: figure %q missing or not a number: %v", r["scenario"], r["variant"], name, r)
	}
	return v
}

// checkTurnstileRuns fails the test for every turnstile variant that was
// not ok.
func checkTurnstileRuns(t *testing.T, runs []demoRun) {
	t.Helper()
	for _, r := range runs {
		if r["naive"] == false && r["ok"] != true {
			t.Errorf("%s/%s was wrong: %s", r["scenario"], r["variant"], r["summary"])
		}
	}
}

// runDemoOK runs the demo with args, which must exit 0.
func runDemoOK(t *testing.T, args ...string) outcome {
	t.Helper()
	r := runDemo(t, args...)
	if r.code != 0 {
		t.Fatalf("exit code %d, want 0; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r
}

// runDemoJSON runs the demo with args, --json among them, which must
// exit 0, and returns its runs, having checked those with turnstile.
func runDemoJSON(t *testing.T, args ...string) (outcome, []demoRun) {
	t.Helper()
	r := runDemoOK(t, args...)
	runs := parseDemoJSON(t, r.stdout)
	checkTurnstileRuns(t, runs)
	return r, runs
}

func TestDemoJSONAllScenarios(t *testing.T) {
	rs := testserver.StartRedis(t)
	pg := testserver.StartPostgres(t)
	r, runs := runDemoJSON(t, "--json", "--redis", rs.URL(), "--postgres", pg.URL(), "--waiters", "200", "--outage-ttl", outageTestTTL, "--outage-phase", outageTestPhase)
	if !strings.Contains(r.stderr, "given with --redis") || !strings.Contains(r.stderr, "given with --postgres") {
		t.Errorf("stderr does not say which servers were used:\n%s", r.stderr)
	}
	checkOutageRuns(t, runs, "postgres")
	checkOutageRealServers(t, r.stderr)
	want := map[string][]string{
		"flash-sale":     {"naive", "lock", "atomic-decr", "sharded", "cas"},
		"double-payment": {"naive", "idempotency+lock"},
		"rider":          {"naive", "lock"},
		"gc-pause":       {"naive", "fence"},
		"long-job":       {"naive", "watchdog"},
		"owner-id":       {"naive", "turnstile"},
		"herd":           {"fixed-interval", "jitter", "notify", "notify+coalesce"},
		"coupon":         {"naive", "update-where-unused", "redis-script"},
		"jobs":           {"naive", "skip-locked", "crashed-worker"},
		"redlock-outage": append(outagePhaseNames[:], "tokens", "fence"),
	}
	n := 0
	for s, vs := range want {
		for _, v := range vs {
			find(t, runs, s, v)
			n++
		}
	}
	if len(runs) != n {
		t.Errorf("%d runs, want %d:\n%s", len(runs), n, r.stdout)
	}

	// The naive flash sale oversells and the naive dispatchers double up:
	// with every order in flight at once, that is what the code does.
	naive := find(t, runs, "flash-sale", "naive")
	if number(t, naive, "sold") <= defaultFlashUnits || number(t, naive, "final_stock") >= 0 || naive["ok"] != false {
		t.Errorf("naive flash sale did not oversell: %v", naive)
	}
	for _, v := range []string{"lock", "atomic-decr", "sharded", "cas"} {
		run := find(t, runs, "flash-sale", v)
		if number(t, run, "sold") != defaultFlashUnits || number(t, run, "final_stock") != 0 || number(t, run, "min_stock") < 0 {
			t.Errorf("flash sale %s: %v", v, run)
		}
	}
	if rider := find(t, runs, "rider", "naive"); number(t, rider, "orders_with_several_riders") == 0 || rider["ok"] != false {
		t.Errorf("naive dispatchers never assigned two riders to an order: %v", rider)
	}
	if rider := find(t, runs, "rider", "lock"); number(t, rider, "orders_with_several_riders") != 0 || number(t, rider, "orders_without_rider") != 0 {
		t.Errorf("dispatchers under the lock: %v", rider)
	}
	pay := find(t, runs, "double-payment", "idempotency+lock")
	if number(t, pay, "charges") != 1 || !strings.Contains(pay["final_answer"].(string), "charged ch_1") {
		t.Errorf("payment with idempotency key: %v", pay)
	}
	fenced := find(t, runs, "gc-pause", "fence")
	if a, b := number(t, fenced, "token_a"), number(t, fenced, "token_b"); a >= b || fenced["a_accepted"] != false {
		t.Errorf("fenced write of the paused holder: %v", fenced)
	}
	if !strings.Contains(fenced["summary"].(string), "rejected: token ") {
		t.Errorf("summary does not show the two tokens: %s", fenced["summary"])
	}
	owners := find(t, runs, "owner-id", "turnstile")
	if number(t, owners, "distinct_owners") != 5 || number(t, owners, "released_others_lock") != 0 {
		t.Errorf("owner ids under turnstile: %v", owners)
	}
}

// TestDemoHerd: 600 waiters in 2 processes; notices with local lines make
// every waiter hold the lock once with at most 3 store commands per
// acquisition, fewer than retrying at a fixed interval costs.
func TestDemoHerd(t *testing.T) {
	rs := testserver.StartRedis(t)
	_, runs := runDemoJSON(t, "herd", "--json", "--redis", rs.URL(), "--waiters", "600")
	best := find(t, runs, "herd", "notify+coalesce")
	fixed := find(t, runs, "herd", "fixed-interval")
	if number(t, best, "acquired") != 600 || number(t, best, "failed") != 0 {
		t.Errorf("not every waiter held the lock: %v", best)
	}
	// The fixed-interval baseline is naive: on a busy machine some of its
	// waiters may run out of the herd's 20 s, which makes each of its
	// acquisitions cost more still. It must have served some.
	if number(t, fixed, "acquired") == 0 {
		t.Errorf("fixed-interval retry: no waiter held the lock: %v", fixed)
	}
	// Most of one process's waiters take the lock from each other without
	// the store (handoffs within a Client), so an acquisition may cost
	// well under one command; more than 3 is a herd.
	perAcq := number(t, best, "store_commands_per_acquisition")
	if perAcq > 3 || perAcq <= 0 {
		t.Errorf("notifications + coalescing: %.2f store commands per acquisition, want above 0 and at most 3", perAcq)
	}
	if f := number(t, fixed, "store_commands_per_acquisition"); f <= perAcq {
		t.Errorf("fixed-interval retry: %.2f commands per acquisition, not more than notifications + coalescing (%.2f)", f, perAcq)
	}
}

func TestDemoInProcess(t *testing.T) {
	r, runs := runDemoJSON(t, "--json", "--in-process", "--units", "250", "--orders", "1000", "flash-sale", "gc-pause")
	if !strings.Contains(r.stderr, "redis: in-process (miniredis)") || !strings.Contains(r.stderr, "postgres: none (--in-process)") {
		t.Errorf("stderr does not say that the stores are in-process:\n%s", r.stderr)
	}
	if len(runs) != 6 { // flash-sale without cas, gc-pause
		t.Errorf("%d runs, want 6:\n%s", len(runs), r.stdout)
	}
	if naive := find(t, runs, "flash-sale", "naive"); number(t, naive, "oversold") == 0 {
		t.Errorf("naive flash sale on miniredis did not oversell: %v", naive)
	}
	for _, v := range []string{"lock", "atomic-decr", "sharded"} {
		if run := find(t, runs, "flash-sale", v); number(t, run, "sold") != 250 || number(t, run, "final_stock") != 0 || number(t, run, "orders") != 1000 {
			t.Errorf("flash sale %s on miniredis: %v", v, run)
		}
	}
	fenced := find(t, runs, "gc-pause", "fence")
	if fenced["store"] != "redis" || fenced["a_accepted"] != false || fenced["b_accepted"] != true {
		t.Errorf("gc-pause on the Redis guard: %v", fenced)
	}
}

func TestDemoTable(t *testing.T) {
	rs := testserver.StartRedis(t)
	r := runDemoOK(t, "--redis", rs.URL(), "--in-process=false", "owner-id", "long-job")
	for _, want := range []string{"SCENARIO", "VERDICT", "owner-id", "long-job", "naive: ", "WRONG", "watchdog", "ok"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table has no %q:\n%s", want, r.stdout)
		}
	}
	if strings.Index(r.stdout, "owner-id") > strings.Index(r.stdout, "long-job") {
		t.Errorf("scenarios not in the order given:\n%s", r.stdout)
	}
}

// descendants returns the processes below pid, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ')'.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		fields := strings.Fields(string(rest))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		parent[p] = ppid
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	fields := strings.Fields(string(rest))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func TestDemoInterruptLeavesNothingBehind(t *testing.T) {
	p := startDemo(t, "flash-sale")
	pid := p.cmd.Process.Pid
	// Wait until the sale runs: servers and worker processes are up.
	var kids []int
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			t.Fatalf("demo exited (%d) before it could be interrupted; stderr:\n%s", p.code, p.stderr.String())
		default:
		}
		kids = descendants(pid)
		workers := 0
		for _, k := range kids {
			if cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(k), "cmdline")); bytes.Contains(cmdline, []byte(workerArg)) {
				workers++
			}
		}
		if workers >= flashWorkers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no worker processes after 60 s; children %v", kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(kids) < flashWorkers+2 { // workers, redis-server, postgres
		t.Fatalf("children %v: want the workers and both servers", kids)
	}
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t, 30*time.Second)
	if r.code != 128+int(syscall.SIGINT) {
		t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, 128+int(syscall.SIGINT), r.stderr)
	}
	if !strings.Contains(r.stderr, "received SIGINT during flash-sale") {
		t.Errorf("stderr does not say it was interrupted:\n%s", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout after an interrupted run: %q", r.stdout)
	}
	// PostgreSQL's backends leave shortly after their postmaster.
	deadline = time.Now().Add(15 * time.Second)
	for _, k := range kids {
		for alive(k) {
			if time.Now().After(deadline) {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(k), "cmdline"))
				t.Errorf("process %d (%s) outlived the demo", k, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

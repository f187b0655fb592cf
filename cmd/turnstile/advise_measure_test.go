package main

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

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

// measuredCost is a measured cost of a redis-server (µs per acquisition)
// and a Redlock of n nodes, with round trip rt µs.
func measuredCost(redis, redlock float64, n int, rt float64) cost {
	c := documentedCost()
	c.source, c.redisCPU, c.redlockCPU, c.redlockN, c.roundTrip = "measured", redis, redlock, n, rt
	c.scriptCPU = redis * docScriptCPU / docRedisCPU
	return c
}

// A measured Redlock's cost sizes the Redlock presets by what one of its
// nodes spends: a phase-3 Redlock has 5 nodes whatever was measured.
func TestAdviseMeasuredCostSizes(t *testing.T) {
	t.Parallel()
	in, err := parseAdvise([]string{"--rate", "60k", "--safety", "money", "--stores", "redis"})
	if err != nil {
		t.Fatal(err)
	}
	k := advise(in, measuredCost(10, 60, 3, 100)).Capacity
	perGroup := headroom * 1e6 / 20
	if k.Source != "measured" || k.Store != "redlock-5" || k.ServerCPUMicrosPerAcq != 100 || !near(k.PerGroupRate, perGroup) || k.Groups != 2 || k.Nodes != 10 || !k.Fits {
		t.Errorf("capacity %+v, want measured redlock-5, 100 µs, %.0f/s per Redlock, 2 Redlocks of 5", k, perGroup)
	}
	if !near(k.StoreCores, 60000*100/1e6) || !near(k.InFlight, 60000*(50000+200)/1e6) {
		t.Errorf("%v cores, %v in flight", k.StoreCores, k.InFlight)
	}
}

// A redlock:// --backend is measured over its nodes too: the Redlock
// presets are sized from what one of its nodes spends.
func TestAdviseMeasuredRedlock(t *testing.T) {
	t.Parallel()
	var hosts []string
	for range 3 {
		hosts = append(hosts, testserver.StartRedis(t).Addr())
	}
	// Fresh servers hold no lock anyone could lose: no restart quarantine.
	u := "redlock://" + strings.Join(hosts, ",") + "?quarantine=0&node_timeout=2s"
	r := runAdvise(t, "--rate", "30k", "--safety", "money", "--stores", "redis", "--backend", u, "--duration", "500ms", "--json")
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
	t.Logf("Redlock of 5 from a measured Redlock of 3: %.1f µs server CPU per acquisition, %.0f/s per Redlock", k.ServerCPUMicrosPerAcq, k.PerGroupRate)
	if a.Preset.Phase != 3 || k.Source != "measured" || k.Store != "redlock-5" || k.ServerCPUMicrosPerAcq <= 0 || k.Nodes != 5*k.Groups || len(a.Preset.URLs) != k.Groups {
		t.Errorf("phase %d, capacity %+v; want phase 3 sized from the measured Redlock of 3", a.Preset.Phase, k)
	}
	m := regexp.MustCompile(`redlock-3/c=64 +[0-9]+ acq/s .* ([0-9.]+) µs server CPU/acq`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no Redlock cell in stderr:\n%s", r.stderr)
	}
	if measured, _ := strconv.ParseFloat(m[1], 64); math.Abs(k.ServerCPUMicrosPerAcq-measured/3*5) > 0.1*5/3+0.01*k.ServerCPUMicrosPerAcq {
		t.Errorf("%.1f µs per acquisition on a Redlock of 5, want 5/3 of the measured %.1f", k.ServerCPUMicrosPerAcq, measured)
	}
}

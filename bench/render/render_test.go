package render_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/bench/render"
	"github.com/turnstilelock/turnstile/bench/workload"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func cell(id, lib string, conc int, perSec float64) workload.Result {
	name, _, _ := strings.Cut(id, "/")
	return workload.Result{Kind: "cell", Workload: name, ID: id, Library: lib, Concurrency: conc, Nodes: 1, Processes: 1,
		Seconds: 3, Acquisitions: int64(perSec * 3), PerSecond: perSec, P50Micros: 120, P99Micros: 2400, P999Micros: 5100, MaxMicros: 9000,
		FairMin: 10, FairMax: 12, Jain: 0.998, Commands: int64(perSec * 3 * 4), CommandsPerAcq: 4, ScriptsPerAcq: 2,
		ServerCPUMicrosPerAcq: 16, ServerCores: perSec * 16 / 1e6}
}

func sample() render.Report {
	herd := cell("herd/c=2000", "turnstile", 2000, 900)
	herd.HoldMicros, herd.HandoffGapMicros, herd.HotKeys = 1000, 110.5, 1
	peerHerd := cell("herd/c=2000", "peer<b>", 2000, 450)
	peerHerd.HoldMicros, peerHerd.HandoffGapMicros, peerHerd.HotKeys = 1000, 1222, 1
	return render.Report{
		Title:   "sample run",
		Started: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC),
		Notes:   []string{"taken on a busy machine"},
		Cells: []workload.Result{
			cell("uncontended/c=1", "turnstile", 1, 10000), cell("uncontended/c=1", "peer<b>", 1, 8000),
			cell("uncontended/c=64", "peer<b>", 64, 20000), cell("uncontended/c=64", "turnstile", 64, 50000),
			herd, peerHerd,
		},
		Limits:   []workload.LimitResult{{Kind: "limit", Pipeline: 16, Clients: 50, Requests: 1000, SetPerSecond: 400000, EvalshaPerSecond: 150000, EvalshaCPUMicros: 5}},
		Scale:    &workload.ScaleResult{Kind: "scale", Leases: 1000000, TTL: 30, AcquireSeconds: 20, HeldSeconds: 30, BytesPerLease: 612, RenewalsPerSecond: 99000, CommandsPerSecond: 300000, NeededPerSecond: 100000},
		Problems: []string{"redlock-5/c=64 redsync: 3 errors"},
	}
}

func TestCompareAndCapacities(t *testing.T) {
	r := sample()
	cs := render.Compare(r.Cells)
	if len(cs) != 3 || cs[1].ID != "uncontended/c=64" || cs[1].BestPeer != "peer<b>" || cs[1].Ratio != 2.5 {
		t.Fatalf("Compare: %+v", cs)
	}
	// A faster variant of turnstile is no peer.
	variant := cell("uncontended/c=64", "turnstile-shared-backoff", 64, 90000)
	if cs := render.Compare(append(r.Cells, variant)); cs[1].BestPeer != "peer<b>" || cs[1].Ratio != 2.5 {
		t.Fatalf("Compare with a turnstile variant: %+v", cs)
	}
	caps := render.Capacities(r)
	// Two uncontended turnstile cells × one redis-benchmark figure: 150,000
	// EVALSHA/s ÷ 2 scripts per pair = 75,000 pairs/s.
	if len(caps) != 2 || caps[1].ScriptPairs != 75000 || math.Abs(caps[1].Fraction-50000.0/75000) > 1e-9 {
		t.Fatalf("Capacities: %+v", caps)
	}
	// 16 µs of server CPU per pair: 62,500 pairs/s with a server core
	// busy all along, 83% of the one-line script's 75,000.
	if c := caps[1]; c.PairCPUMicros != 16 || c.ScriptCPUMicros != 5 || c.ServerCores != 0.8 || math.Abs(c.Ceiling-62500.0/75000) > 1e-9 {
		t.Fatalf("Capacities' server CPU: %+v", c)
	}
}

func TestScaleOuts(t *testing.T) {
	single := cell("uncontended/c=64", "turnstile", 64, 40000)
	cl := cell("cluster-3/c=64", "turnstile", 64, 30000)
	cl.Nodes, cl.Cluster, cl.ServerCPUMicrosPerAcq = 3, true, 20
	other := cell("cluster-3/c=256", "turnstile", 256, 30000) // no single cell of 256
	other.Nodes, other.Cluster = 3, true
	so := render.ScaleOuts([]workload.Result{single, cl, other, cell("uncontended/c=64", "peer", 64, 1)})
	if len(so) != 1 {
		t.Fatalf("ScaleOuts: %+v", so)
	}
	// 16 µs per pair on one server, 20 on the cluster: 62,500 against
	// 50,000 pairs per server core-second.
	if s := so[0]; s.Single != "uncontended/c=64" || s.Masters != 3 || s.PerCore != 50000 || s.SinglePerCore != 62500 || s.Ratio != 0.8 {
		t.Fatalf("ScaleOut: %+v", s)
	}
	r := sample()
	r.Cells = append(r.Cells, cl)
	var b bytes.Buffer
	if err := render.Table(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "cluster-3/c=64") || !strings.Contains(b.String(), "= 0.80x") {
		t.Errorf("table without the scale-out line:\n%s", b.String())
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := render.Table(&b, sample()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"workload          library    acq/s  p50 ms  p99 ms  p99.9 ms  fair min/max   jain  cmds/acq  scripts/acq  srv µs/acq  srv cores  gap ms  errors\n",
		"\nuncontended/c=64  turnstile  50000   0.120    2.40      5.10         10/12  0.998      4.00         2.00        16.0       0.80       -       0\n",
		"\nherd/c=2000       turnstile    900   0.120    2.40      5.10         10/12  0.998      4.00         2.00        16.0       0.01   0.111       0\n",
		"\nherd/c=2000       peer<b>      450   0.120    2.40      5.10         10/12  0.998      4.00         2.00        16.0       0.01    1.22       0\n",
		"  uncontended/c=64                 50000/s vs peer<b>     20000/s  = 2.50x\n",
		"-P 16     50000 pairs/s of     75000 (2.00 scripts/pair) = 67%; a pair costs the server 16.0 µs of CPU = 3.2 one-line EVALSHAs (5.00 µs each): ceiling 83%, server busy 0.80 cores\n",
		"-P 16  SET    400000/s   EVALSHA (SET NX PX script)    150000/s, 5.00 µs of server CPU each",
		"612 bytes of client heap per lease, 99000 renewal scripts/s of 100000 needed (300000 commands/s), 0 forced expiries",
		"redlock-5/c=64 redsync: 3 errors",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestJSONLines(t *testing.T) {
	var b bytes.Buffer
	r := sample()
	if err := render.JSONLines(&b, r); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var cells []workload.Result
	for line := range strings.Lines(b.String()) {
		var m struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		kinds[m.Kind]++
		if m.Kind == "cell" {
			var c workload.Result
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatal(err)
			}
			cells = append(cells, c)
		}
	}
	want := map[string]int{"run": 1, "cell": 6, "limit": 1, "scale": 1, "comparison": 3, "capacity": 2, "problem": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %q lines, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
	if len(cells) != 6 || cells[4].HandoffGapMicros != 110.5 || cells[3].PerSecond != 50000 || cells[0].P999Micros != 5100 {
		t.Errorf("cells did not round-trip: %+v", cells)
	}
}

func TestHTML(t *testing.T) {
	var b bytes.Buffer
	if err := render.HTML(&b, sample()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.HasSuffix(page, "</html>\n") {
		t.Fatalf("not a whole page: %.80q … %.40q", page, page[max(0, len(page)-40):])
	}
	for _, bad := range []string{"<script", "http://", "https://", "peer<b>", "NaN", "Inf"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	for _, want := range []string{"sample run", "taken on a busy machine", "peer&lt;b&gt;", "2.50×", "67%", "a fully busy server core would reach 83%", "612 bytes", "Handoff gap"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Charts: uncontended throughput, other workloads, commands, handoff
	// gap, and one latency chart per workload; each well-formed XML.
	svgs := regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 7 {
		t.Fatalf("%d charts, want 7", len(svgs))
	}
	for _, s := range svgs {
		d := xml.NewDecoder(strings.NewReader(s))
		for {
			_, err := d.Token()
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("chart is not well-formed: %v\n%s", err, s)
				}
				break
			}
		}
	}
	// The uncontended throughput line has a point per library and
	// concurrency.
	if n := strings.Count(svgs[0], "<circle"); n != 4 {
		t.Errorf("throughput chart has %d points, want 4", n)
	}
}

// Every chart is wide enough for its legend: the six libraries of a run
// with their long names, each in a colour of its own.
func TestLegendFits(t *testing.T) {
	libs := []string{"turnstile", "turnstile-shared-backoff", "redsync", "redislock", "rueidislock", "rueidislock-km1"}
	var cells []workload.Result
	for i, lib := range libs {
		cells = append(cells, cell("uncontended/c=1", lib, 1, float64(1000*(i+1))), cell("contended-1/c=64/clients=8", lib, 64, float64(500*(i+1))))
	}
	var b bytes.Buffer
	if err := render.HTML(&b, render.Report{Title: "six", Cells: cells}); err != nil {
		t.Fatal(err)
	}
	width := regexp.MustCompile(`<svg [^>]*width="(\d+)"`)
	text := regexp.MustCompile(`<text x="(\d+)" y="\d+" class="a">([^<]*)</text>`)
	fill := regexp.MustCompile(`<rect x="\d+" y="\d+" width="10" height="10" fill="(#[0-9a-f]+)"/>`)
	for _, s := range regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(b.String(), -1) {
		w, _ := strconv.Atoi(width.FindStringSubmatch(s)[1])
		for _, m := range text.FindAllStringSubmatch(s, -1) {
			x, _ := strconv.Atoi(m[1])
			if end := x + 7*len(m[2]); end > w {
				t.Errorf("legend %q ends at %d in a chart %d wide", m[2], end, w)
			}
		}
		seen := map[string]bool{}
		for _, m := range fill.FindAllStringSubmatch(s, -1) {
			if seen[m[1]] {
				t.Errorf("two series coloured %s", m[1])
			}
			seen[m[1]] = true
		}
	}
}

// The comparison lines line up whatever the fastest peers' names.
func TestCompareAligned(t *testing.T) {
	r := render.Report{Cells: []workload.Result{
		cell("uncontended/c=1", "turnstile", 1, 10000), cell("uncontended/c=1", "rs", 1, 8000),
		cell("contended-1/c=64/clients=8", "turnstile", 64, 5000), cell("contended-1/c=64/clients=8", "rueidislock-km1", 64, 2000),
	}}
	var b bytes.Buffer
	if err := render.Table(&b, r); err != nil {
		t.Fatal(err)
	}
	_, cmp, _ := strings.Cut(b.String(), "turnstile against the fastest peer:\n")
	var at []int
	for line := range strings.Lines(cmp) {
		if i := strings.Index(line, "/s  = "); i > 0 {
			at = append(at, i)
		}
	}
	if len(at) != 2 || at[0] != at[1] {
		t.Errorf("comparison columns at %v:\n%s", at, cmp)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestQuickRun runs the program's cells, tiny, against real redis-servers:
// every library on one server, in one client and in two, turnstile and
// redsync on a Redlock of three, a herd spread over four clients in two
// worker processes, redis-benchmark and a small held-lease cell, then
// writes the three outputs and reads them back.
func TestQuickRun(t *testing.T) {
	single := testserver.StartRedis(t)
	env := environment{single: single.Addr(), nodes: []string{single.Addr()}, flush: func() error {
		_, err := single.Do("FLUSHALL")
		return err
	}}
	for range 2 {
		env.nodes = append(env.nodes, testserver.StartRedis(t).Addr())
	}
	cfg, err := parseFlags([]string{"--quick", "--duration", "150ms", "--out", t.TempDir(), "--scale=true", "--scale-leases", "500", "--scale-ttl", "1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.limitRequests = 2000
	wls := []workload.Workload{
		{Name: "uncontended", Concurrency: 2, Nodes: 1},
		{Name: "contended-1", Concurrency: 4, HotKeys: 1, Nodes: 1, Clients: 2},
		{Name: "redlock-3", Concurrency: 2, Nodes: 3},
		{Name: "herd", Concurrency: 20, HotKeys: 1, Hold: time.Millisecond, Nodes: 1, Processes: 2, Clients: 4},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var log bytes.Buffer
	rep := runCells(ctx, cfg, wls, env, &log)
	t.Logf("progress:\n%s", log.String())

	all := []string{"turnstile", "turnstile-shared-backoff", "turnstile-goredis", "redsync", "redislock", "rueidislock", "rueidislock-km1"}
	want := map[string][]string{
		"uncontended/c=2":             all,
		"contended-1/c=4/clients=2":   all,
		"redlock-3/c=2":               {"turnstile", "turnstile-shared-backoff", "redsync"},
		"herd/c=20/clients=4/procs=2": all,
	}
	got := map[string][]string{}
	for _, c := range rep.Cells {
		got[c.ID] = append(got[c.ID], c.Library)
		if c.Acquisitions == 0 || c.PerSecond <= 0 || c.P50Micros <= 0 || c.P99Micros < c.P50Micros || c.P999Micros < c.P99Micros {
			t.Errorf("%s %s: no acquisitions or bad percentiles: %+v", c.ID, c.Library, c)
		}
		if c.Commands <= 0 || c.CommandsPerAcq <= 0 || c.FairMax <= 0 || c.Jain <= 0 {
			t.Errorf("%s %s: no server commands or no fairness: %+v", c.ID, c.Library, c)
		}
		if c.Nodes == 1 && c.Errors != 0 {
			t.Errorf("%s %s: %d errors, the first: %s", c.ID, c.Library, c.Errors, c.Error)
		}
		if wc := map[string]int{"contended-1": 2, "herd": 4}[c.Workload]; wc > 0 && c.Clients != wc {
			t.Errorf("%s %s: %d clients, want %d", c.ID, c.Library, c.Clients, wc)
		}
	}
	for id, libs := range want {
		if strings.Join(got[id], ",") != strings.Join(reorder(libs, got[id]), ",") || len(got[id]) != len(libs) {
			t.Errorf("%s ran %v, want %v", id, got[id], libs)
		}
	}
	for _, c := range rep.Cells {
		if c.Processes == 2 && c.HandoffGapMicros <= 0 {
			t.Errorf("%s %s: handoff gap %v, want > 0", c.ID, c.Library, c.HandoffGapMicros)
		}
	}
	if len(rep.Limits) != 2 || rep.Limits[0].EvalshaPerSecond <= 0 || rep.Limits[1].SetPerSecond <= 0 {
		t.Errorf("redis-benchmark figures: %+v", rep.Limits)
	}
	if s := rep.Scale; s == nil || s.Leases != 500 || s.BytesPerLease <= 0 || s.RenewalsPerSecond <= 0 {
		t.Errorf("scale cell: %+v", s)
	}
	if len(rep.Problems) != 0 {
		t.Logf("problems: %q", rep.Problems)
	}

	var stdout bytes.Buffer
	if err := write(cfg.out, rep, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"acq/s", "p99 ms", "fair min/max", "cmds/acq", "gap ms", "rueidislock-km1", "turnstile-shared-backoff", "redis-benchmark", "held leases"} {
		if !strings.Contains(stdout.String(), col) {
			t.Errorf("table lacks %q:\n%s", col, stdout.String())
		}
	}
	kinds := map[string]int{}
	raw, err := os.ReadFile(filepath.Join(cfg.out, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("results.jsonl line %q: %v", line, err)
		}
		kind, _ := m["kind"].(string)
		kinds[kind]++
		if kind == "cell" {
			for _, f := range []string{"id", "library", "per_second", "p50_us", "p99_us", "p999_us", "fair_min", "fair_max", "jain", "commands_per_acq", "acquisitions"} {
				if _, ok := m[f]; !ok {
					t.Errorf("cell line lacks %q: %s", f, line)
				}
			}
		}
	}
	if kinds["run"] != 1 || kinds["cell"] != len(rep.Cells) || kinds["limit"] != 2 || kinds["scale"] != 1 || kinds["comparison"] != 4 {
		t.Errorf("results.jsonl holds %v", kinds)
	}
	page, err := os.ReadFile(filepath.Join(cfg.out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg"); n < 4 || n != strings.Count(string(page), "</svg>") {
		t.Errorf("report.html has %d charts", n)
	}
}

// reorder returns want in the order got lists them, for comparing sets.
func reorder(want, got []string) []string {
	var out []string
	for _, g := range got {
		for _, w := range want {
			if g == w {
				out = append(out, w)
			}
		}
	}
	return out
}

func TestFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.duration != time.Second || cfg.scale || !cfg.peers || cfg.waiters != 500 || len(cfg.workloads()) != 14 {
		t.Errorf("--quick: %+v, %d workloads", cfg, len(cfg.workloads()))
	}
	cfg, err = parseFlags([]string{"--only", "^herd", "--peers=false", "--duration", "5s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.duration != 5*time.Second || !cfg.scale || cfg.peers || len(cfg.workloads()) != 3 {
		t.Errorf("--only ^herd: %+v, %d workloads", cfg, len(cfg.workloads()))
	}
	for _, bad := range [][]string{
		{"--duration", "0s"},
		{"--only", "("},
		{"--only", "nothing-like-this"},
		{"--herd", "15"},
		{"--scale", "maybe"},
		{"--scale-leases", "0"},
		{"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("parseFlags(%q) = %v, want an error", bad, err)
		}
	}
}

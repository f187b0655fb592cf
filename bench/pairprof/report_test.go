package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/bench/workload"
)

func TestParseStats(t *testing.T) {
	got := parseStats("# Commandstats\r\ncmdstat_set:calls=4,usec=8,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=2,usec=13,usec_per_call=6.50\r\ncmdstat_info:calls=9,usec=90\r\ncmdstat_config|resetstat:calls=1,usec=20\r\ngarbage\r\ncmdstat_get:calls=x\r\n")
	if got["set"] != (stat{4, 8}) || got["evalsha"] != (stat{2, 13}) {
		t.Fatalf("parseStats = %v", got)
	}
	for _, k := range []string{"info", "config|resetstat"} {
		if _, ok := got[k]; ok {
			t.Errorf("parseStats kept %s", k)
		}
	}
}

func TestParseFlagsRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{{"--workers", "0"}, {"--workers", "x"}, {"--passes", "0"}, {"--libs", "("}, {"--duration", "-1s"}} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) accepted it", args)
		}
	}
}

func TestReportRatios(t *testing.T) {
	var b bytes.Buffer
	libs := []workload.Library{{Name: "turnstile"}, {Name: "redsync"}}
	report(&b, workload.Workload{Name: "uncontended", Concurrency: 1, Nodes: 1}, libs, map[string][]cell{
		"turnstile": {{perSecond: 100, acquisitions: 10, cmds: map[string]stat{"set": {20, 40}}}, {perSecond: 300}},
		"redsync":   {{perSecond: 200}, {perSecond: 300}},
	}, "1 1 1")
	if !strings.Contains(b.String(), "0.75×") || !strings.Contains(b.String(), "set 2.00×2.00µs") {
		t.Fatalf("report:\n%s", b.String())
	}
}

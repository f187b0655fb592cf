package main

import (
	"strings"
	"testing"
	"time"
)

// TestMarkdownColumns: the table has the double-grant and unreplicated
// columns, the latter counted on failover rows only.
func TestMarkdownColumns(t *testing.T) {
	counted := func(sections, double, unreplicated int) verdict {
		var v verdict
		v.Sections, v.DoubleGrants, v.Unreplicated = sections, double, unreplicated
		return v
	}
	r := report{Command: "go run ./chaos", Commit: "abc", Wall: time.Minute, Settings: settings{Workers: 3, TTL: time.Second}, Cells: []cell{
		{Store: "redis-sentinel", Config: "primary, replica, sentinels", Fault: "failover", Verdict: counted(100, 2, 7)},
		{Store: "redis-sentinel", Config: "primary, replica, sentinels", Fault: "blackhole", Verdict: counted(50, 0, 3)},
	}}
	md := r.markdown()
	if !strings.Contains(md, "| fault | sections | fenced violations | control lost | refused | double grants | without a replica | p99 acquire | recovery | verdict |") {
		t.Fatalf("header:\n%s", md)
	}
	if !strings.Contains(md, "| failover | 100 | 0 | 0 | 0 | 2 | 7 |") {
		t.Errorf("failover row without its counts:\n%s", md)
	}
	if !strings.Contains(md, "| blackhole | 50 | 0 | 0 | 0 | 0 | — |") {
		t.Errorf("a row without a failover should show no unreplicated count:\n%s", md)
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| ") && strings.Count(line, "|")-strings.Count(line, `\|`) != 11 {
			t.Errorf("a row of the wrong width: %s", line)
		}
	}
}

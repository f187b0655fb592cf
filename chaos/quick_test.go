//go:build !race

package main

import (
	"context"
	"testing"
	"time"
)

// testLog sends the runner's progress to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) { l.t.Log(string(b)); return len(b), nil }

// TestQuick is the quick mode inside the test suite: every store but
// fullOnly, the quick faults, one injection each. Every fenced register must be safe
// and the stores must grant again after each heal — and the faults must
// bite: a paused holder makes the unfenced control lose updates on every
// store, which the fence refuses, and so do a Redis restart without
// persistence and a Sentinel failover that loses a grant; with
// wait_replicas=1 that failover confirms no grant without a replica, and
// the store never grants twice.
//
// It runs without the race detector (scripts/test.sh runs such tests on
// their own): its workers are processes, and the runner's concurrency
// is covered by the other tests, which do run under it.
func TestQuick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s := settings{Stores: quickStores(), Faults: quickFaults, Duration: time.Second, Workers: 3,
		TTL: 500 * time.Millisecond, Hold: 2 * time.Millisecond, Dir: t.TempDir(), Log: testLog{t}}
	var cells []cell
	if err := run(ctx, s, func(c cell) { cells = append(cells, c); t.Log(summary(c)) }); err != nil {
		t.Fatal(err)
	}
	if len(cells) != len(s.Stores)*len(quickFaults) {
		t.Fatalf("%d cells, want %d", len(cells), len(s.Stores)*len(quickFaults))
	}
	for _, c := range cells {
		v := c.Verdict
		switch {
		case c.Error != "":
			t.Errorf("%s × %s could not run: %s", c.Store, c.Fault, c.Error)
			continue
		case c.Skipped != "":
			if c.Fault == "holder-pause" {
				t.Errorf("%s × holder-pause skipped: %s", c.Store, c.Skipped)
			}
			continue
		}
		if v.Violations() != 0 || v.Linearizable != "ok" {
			t.Errorf("%s × %s: fenced register unsafe: %+v", c.Store, c.Fault, v)
		}
		if v.Unrecovered != 0 {
			t.Errorf("%s × %s: no grant within %.0f ms of a heal", c.Store, c.Fault, v.BoundMS)
		}
		if v.Sections == 0 || c.Faults == 0 {
			t.Errorf("%s × %s: %d sections, %d faults", c.Store, c.Fault, v.Sections, c.Faults)
		}
		bites := c.Fault == "holder-pause" || (c.Store == "redis" && c.Fault == "member-kill") ||
			(c.Store == "redis-sentinel" && c.Fault == "failover")
		if bites && (v.ControlLost == 0 || v.StaleRefused == 0) {
			t.Errorf("%s × %s did not bite: control lost %d, stale writes refused %d", c.Store, c.Fault, v.ControlLost, v.StaleRefused)
		}
		if c.Store == "redis-sentinel" && c.Fault == "failover" && v.Unreplicated == 0 {
			t.Errorf("redis-sentinel × failover granted nothing while the replica was cut off: the fault did not make the grant it loses")
		}
		// A worker descheduled past its lease on a busy machine overlaps
		// the next holder in any cell (the control loses an update, the
		// fence refuses it); what wait_replicas promises is that no grant
		// is confirmed without a replica, so none is lost and the store
		// never grants twice.
		if c.Store == "redis-sentinel-wait" && c.Fault == "failover" && (v.Unreplicated != 0 || v.DoubleGrants != 0) {
			t.Errorf("with wait_replicas=1 the store confirmed %d grants while the replica was cut off and granted %d twice (%s)", v.Unreplicated, v.DoubleGrants, v.DoubleGrant)
		}
	}
}

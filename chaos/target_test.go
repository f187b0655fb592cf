package main

import (
	"slices"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// TestFaultsApply: each configuration takes the faults its capabilities
// allow, and says why it skips the others; the stores whose locks outlive
// a short TTL time their faults by their own floor.
func TestFaultsApply(t *testing.T) {
	behind := func(proxies int) *deployment { return &deployment{proxies: make([]*toxiproxy.Proxy, proxies)} }
	every := []string{"holder-pause", "holder-kill", "member-pause", "member-kill", "member-restart"}
	network := []string{"latency", "blackhole", "reset"}
	partitions := []string{"partition-minority", "partition-majority"}
	clocks := []string{"clock-forward", "clock-back"}
	delayed := []string{"holder-pause-delayed", "holder-kill-delayed"} // not on ZooKeeper, whose locks are sessions
	for _, tc := range []struct {
		name    string
		t       target
		applies [][]string
		lease   time.Duration
	}{
		{"one server", behind(1), [][]string{every, delayed, clocks, network}, time.Second},
		{"redlock", behind(5), [][]string{every, delayed, clocks, network, partitions}, time.Second},
		{"fallback", fallbackPair{behind(2)}, [][]string{every, delayed, network}, time.Second},
		{"sentinel", &sentinelGroup{deployment: behind(0)}, [][]string{every, delayed, clocks, {"failover", "member-partition"}}, time.Second},
		{"cluster", &redisCluster{deployment: behind(0)}, [][]string{every, delayed, clocks, {"failover", "slot-migration"}}, time.Second},
		{"etcd", &etcdCluster{deployment: behind(3)}, [][]string{every, delayed, network, partitions, {"member-partition"}}, etcdLeaseFloor},
		{"zookeeper", &zkEnsemble{deployment: behind(3)}, [][]string{every, clocks, network, partitions, {"member-partition"}}, zkSession},
	} {
		want := slices.Concat(tc.applies...)
		for name, f := range faults() {
			why := f.applies(tc.t)
			if applies := why == ""; applies != slices.Contains(want, name) {
				t.Errorf("%s × %s: applies %v (%q)", tc.name, name, applies, why)
			}
		}
		if got := leaseOf(tc.t, time.Second); got != tc.lease {
			t.Errorf("%s: a lease of 1s lasts %v, want %v", tc.name, got, tc.lease)
		}
	}
}

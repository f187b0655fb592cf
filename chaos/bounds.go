package main

import "time"

// recoverySlack is how long after a heal a grant may take beyond 2
// leases: a lease left by a killed or partitioned holder runs out within
// one, and a client notices a healed connection, dials again and retries
// within a few seconds more.
const recoverySlack = 3 * time.Second

// recoveryBound is how long after a fault heals a grant must come.
func recoveryBound(lease time.Duration) time.Duration { return 2*lease + recoverySlack }

// slowCell is a store × fault cell that cannot grant within
// recoveryBound by design: slack replaces recoverySlack, for the reason
// why.
type slowCell struct {
	slack time.Duration
	why   string
}

// sentinelWaitRejoin: with wait_replicas=1 and one replica, a failover
// leaves the promoted primary no replica to confirm a grant until the old
// primary has rejoined as one, which Sentinel does only some 8 s (4 of
// its 2-s publish periods) after it sees it back, and the replica must
// then synchronise; the full run measured 14–26 s.
const sentinelWaitRejoin = "with wait_replicas=1 and one replica nothing is confirmed after a failover until the old primary rejoins as a replica: Sentinel reconfigures it some 8 s after it is back, then it synchronises"

// sentinelWaitRestart: the restarted primary is back within half a
// second, but the Sentinels, which dial a lost server again at most once
// a second, may not hear from it within their down-after-milliseconds (1
// s) and promote the replica after the heal. The old primary has run all
// along, as a primary: Sentinel makes it a replica only when it has
// reported that role for 8 s, at its next INFO (every 10 s), some 11 s
// after the promotion; until it has synchronised the promoted primary
// has no replica to confirm a grant. The full run measured 11.9 s; its
// two promotions came 1.2–1.3 s after the kill and were undone 11 s
// later: 20 s leaves room for a slow synchronisation on a busy machine.
const sentinelWaitRestart = "with wait_replicas=1 and one replica: the primary, killed and restarted at once, is back before the heal, but the Sentinels may not hear from it within down-after-milliseconds (1 s) and then promote the replica; nothing is confirmed until Sentinel makes the old primary, running all along, a replica (some 11 s after the promotion) and it synchronises"

// slowCells are the cells that keep a bound of their own, each with its
// reason; the table states their bound.
var slowCells = map[[2]string]slowCell{
	{"redis-sentinel-wait", "member-pause"}:     {30 * time.Second, sentinelWaitRejoin},
	{"redis-sentinel-wait", "member-kill"}:      {30 * time.Second, sentinelWaitRejoin},
	{"redis-sentinel-wait", "member-restart"}:   {20 * time.Second, sentinelWaitRestart},
	{"redis-sentinel-wait", "member-partition"}: {30 * time.Second, sentinelWaitRejoin},
}

// cellBound is the recovery bound of a store × fault cell.
func cellBound(store, fault string, lease time.Duration) time.Duration {
	if c, ok := slowCells[[2]string{store, fault}]; ok {
		return 2*lease + c.slack
	}
	return recoveryBound(lease)
}

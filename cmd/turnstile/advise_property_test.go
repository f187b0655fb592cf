package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Over random loads and store costs, the advice fits what it sizes and
// says nothing that another of its figures contradicts (checkAdvice).
func TestAdviseProperties(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	for _, s := range []uint64{1, 2, 3, seed} {
		r := rand.New(rand.NewPCG(s, s>>32))
		for range 1500 {
			args, c := randomLoad(r)
			in, err := parseAdvise(args)
			if err != nil {
				t.Fatalf("seed %d: parseAdvise(%q): %v", s, args, err)
			}
			checkAdvice(t, fmt.Sprintf("seed %d: %q with %+v", s, args, c), in, c, advise(in, c))
		}
	}
}

// randomLoad is a command line of a random load, rates and holds spread
// over their whole ranges, and a documented or random measured cost.
func randomLoad(r *rand.Rand) ([]string, cost) {
	logUniform := func(lo, hi float64) float64 { return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))) }
	// Half of them over the whole ranges, half where lock stores serve.
	rate := logUniform(minAdviseRate, maxAdviseRate)
	hold := time.Duration(logUniform(float64(time.Microsecond), float64(maxAdviseHold)))
	if r.IntN(2) == 0 {
		rate, hold = logUniform(50, 2e5), time.Duration(logUniform(float64(time.Millisecond), float64(15*time.Second)))
	}
	args := []string{"--rate", strconv.FormatFloat(rate, 'f', 3, 64), "--hold", hold.String()}
	switch r.IntN(4) {
	case 1:
		args = append(args, "--hot-key-share", strconv.FormatFloat(r.Float64(), 'f', 4, 64))
	case 2:
		args = append(args, "--hot-key-share", strconv.FormatFloat(logUniform(1e-6, 1), 'f', 8, 64))
	case 3:
		args = append(args, "--hot-key-share", "1")
	}
	if r.IntN(2) == 0 {
		args = append(args, "--safety", "money")
	}
	args = append(args, "--operation", adviseOperations[r.IntN(len(adviseOperations))])
	if r.IntN(4) > 0 {
		var stores []string
		for _, s := range adviseStoreNames {
			if r.IntN(2) == 0 {
				stores = append(stores, s)
			}
		}
		if len(stores) == 0 {
			stores = []string{"none"}
		}
		args = append(args, "--stores", strings.Join(stores, ","))
	}
	c := documentedCost()
	if r.IntN(2) == 0 {
		redis := logUniform(2, 500)
		c = measuredCost(redis, redis*docRedlockCPU/docRedisCPU, docRedlockNodes, logUniform(20, 5000))
		if r.IntN(2) == 0 {
			n := 2 + r.IntN(6)
			c.redlockCPU, c.redlockN = logUniform(2, 500)*float64(n), n
		}
	}
	if r.IntN(4) == 0 {
		// A database that carries more than the documented figure: what
		// phase 4's failover needs.
		c.dbRate = logUniform(100, 1e6)
	}
	return args, c
}

// zeroRate is a rate printed as zero.
var zeroRate = regexp.MustCompile(`(^|[^0-9.,])0( times a second|/s| acquisitions/s| requests/s| renewals/s)`)

// checkAdvice fails t when a, the advice for in with cost c, does not
// carry what it routes to its servers or contradicts itself.
func checkAdvice(t testing.TB, what string, in *adviseInput, c cost, a advice) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s\nadvice: %+v", what, fmt.Sprintf(format, args...), a)
	}
	k, p, row := a.Capacity, a.Preset, a.Recommendation.Row
	if _, ok := tableRows[row]; !ok || a.RunnerUp.Row == row || len(a.Recommendation.Reasons) == 0 || len(a.RunnerUp.Reasons) == 0 {
		fail("recommendation %q, runner-up %q", row, a.RunnerUp.Row)
	}

	// The servers counted are the servers the URLs name.
	if len(p.URLs) == 0 || p.URL != p.URLs[0] {
		fail("url %q, urls %q", p.URL, p.URLs)
	}
	if k.Store == "memory" {
		if k.Groups != 0 || k.Nodes != 0 || p.URL != "mem://" {
			fail("one process with %d groups of %d servers at %s", k.Groups, k.Nodes, p.URL)
		}
	} else if k.Groups < 1 || k.Nodes < k.Groups || k.Nodes%k.Groups != 0 {
		fail("%d servers in %d groups", k.Nodes, k.Groups)
	}
	checkURLs(t, fail, k, p)

	// What each group carries is what is routed to it, after a failover
	// too; and a design that partitions keys has enough groups.
	finite := func(vs ...float64) bool {
		return !slices.ContainsFunc(vs, func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 })
	}
	if !finite(k.RequestsPerSecond, k.PerGroupRate, k.BusiestGroupRate, k.LocksHeld, k.InFlight, k.RenewalsPerSecond, k.StoreCores, k.HotKeyLimit) {
		fail("a figure that is no number")
	}
	if k.Store != "memory" {
		perGroup := k.RequestsPerSecond / float64(k.Groups)
		if k.PerGroupRate <= 0 || k.BusiestGroupRate < perGroup*(1-1e-9) || k.BusiestGroupRate > k.RequestsPerSecond*(1+1e-9) {
			fail("%v requests/s in %d groups of %v/s, the busiest %v/s", k.RequestsPerSecond, k.Groups, k.PerGroupRate, k.BusiestGroupRate)
		}
		fits := carries(k.PerGroupRate, k.BusiestGroupRate) && (k.Failover == nil || carries(k.Failover.PerGroupRate, k.Failover.RequestsPerSecond))
		if k.Fits != fits || fits && !carries(k.PerGroupRate*float64(k.Groups), k.RequestsPerSecond) {
			fail("fits is %v for %v requests/s, the busiest group %v/s of %v/s, failover %+v", k.Fits, k.RequestsPerSecond, k.BusiestGroupRate, k.PerGroupRate, k.Failover)
		}
		hot := k.HotKeyRate * k.RequestsPerSecond / in.Rate
		partitioned := k.Store == "redis" || strings.HasPrefix(k.Store, "redlock-")
		if partitioned && hot < k.PerGroupRate*(1-1e-9) && !k.Fits {
			fail("does not fit, though its hottest key (%v/s) is within one group (%v/s): more groups would carry it", hot, k.PerGroupRate)
		}
		if !k.Fits && !slices.ContainsFunc(a.Notes, func(s string) bool { return strings.Contains(s, "carries") }) {
			fail("does not fit and no note says what does not")
		}
	}
	if p.Phase == 4 || strings.HasPrefix(p.URL, "fallback://") {
		if f := k.Failover; f == nil || p.Phase != 4 || f.RequestsPerSecond != k.RequestsPerSecond || !carries(f.PerGroupRate, f.RequestsPerSecond) {
			fail("phase %d at %s with failover %+v for %v requests/s", p.Phase, p.URL, k.Failover, k.RequestsPerSecond)
		}
	} else if k.Failover != nil {
		fail("a failover without a fallback URL")
	}
	if c.source == "measured" && k.Source == "measured" && k.Store == "redis" && row != rowLockFree && !near(k.PerGroupRate, c.redisCap()) {
		fail("a measured Redis sized at %v/s, not its measured %v/s", k.PerGroupRate, c.redisCap())
	}
	// A measured Redis that carries the load gets it, whatever the
	// table's bound for a server not measured.
	if d := newDemand(in, c); c.source == "measured" && in.Safety == "normal" && in.Stores == nil && row != rowLockFree &&
		d.requests > tableDB && d.requests <= c.redisCap() && (row != rowRedis || k.Groups != 1) {
		fail("%v requests/s, which the measured Redis carries (%v/s), went to %s in %d groups", d.requests, c.redisCap(), row, k.Groups)
	}

	// Locks: held only where the design holds them; renewals only where a
	// watchdog renews; requests are acquisitions and renewals.
	switch {
	case row == rowLockFree:
		if k.LocksHeld != 0 || in.Operation != opPayment && k.RenewalsPerSecond != 0 {
			fail("a lock-free design with %v locks held, %v renewals/s", k.LocksHeld, k.RenewalsPerSecond)
		}
	case !near(k.LocksHeld, in.Rate*in.HoldMicros/1e6):
		fail("%v locks held at %v/s held %v", k.LocksHeld, in.Rate, in.hold)
	case p.Phase == 1 || k.Store == "memory":
		if k.RenewalsPerSecond != 0 || !near(k.RequestsPerSecond, in.Rate) {
			fail("no watchdog, yet %v renewals/s, %v requests/s", k.RenewalsPerSecond, k.RequestsPerSecond)
		}
	default:
		if !near(k.RequestsPerSecond, in.Rate+k.RenewalsPerSecond) {
			fail("%v requests/s from %v acquisitions/s and %v renewals/s", k.RequestsPerSecond, in.Rate, k.RenewalsPerSecond)
		}
	}

	// The table says what --json does, and no figure reads 0 or NaN.
	var b bytes.Buffer
	if err := a.writeTable(&b); err != nil {
		fail("table: %v", err)
	}
	text := b.String()
	if m := zeroRate.FindString(text); m != "" {
		fail("a positive rate printed as %q:\n%s", m, text)
	}
	for _, bad := range []string{"NaN", "Inf", "e+", "%!"} {
		if strings.Contains(text, bad) {
			fail("%q in the table:\n%s", bad, text)
		}
	}
	if fitsLine := regexp.MustCompile(`(?m)^ +fits +(yes|no)\b`).FindStringSubmatch(text); fitsLine == nil || (fitsLine[1] == "yes") != k.Fits {
		fail("the table's fits line %q, --json's fits %v", fitsLine, k.Fits)
	}
	if strings.Contains(text, "locks held") != (k.LocksHeld > 0) {
		fail("the table speaks of locks held while %v are:\n%s", k.LocksHeld, text)
	}
	if m := regexp.MustCompile(`(?m)^ +servers +([0-9]+) \(([0-9]+) × ([0-9]+)\)`).FindStringSubmatch(text); k.Groups > 0 &&
		(m == nil || m[1] != strconv.Itoa(k.Nodes) || m[2] != strconv.Itoa(k.Groups) || m[3] != strconv.Itoa(k.Nodes/k.Groups)) {
		fail("the table's servers %q for %d servers in %d groups", m, k.Nodes, k.Groups)
	}
	for _, u := range p.URLs {
		if !regexp.MustCompile(`(?m)^ +url +` + regexp.QuoteMeta(u) + `$`).MatchString(text) {
			fail("the table does not give the URL %s", u)
		}
	}
	if m := regexp.MustCompile(`[0-9]+\.[0-9]+ Redlocks?`).FindString(text); m != "" {
		fail("a count that is no whole number: %q", m)
	}

	// --json gives the same advice.
	j, err := json.Marshal(a)
	if err != nil {
		fail("json: %v", err)
	}
	var back advice
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil || !reflect.DeepEqual(back.Capacity, a.Capacity) || !reflect.DeepEqual(back.Preset, a.Preset) {
		fail("json round trip: %v", err)
	}
}

// checkURLs fails when the preset's URLs do not name the servers the
// capacity counts.
func checkURLs(t testing.TB, fail func(string, ...any), k capacity, p preset) {
	t.Helper()
	hosts := func(raw string) []string {
		if rest, ok := strings.CutPrefix(raw, "fallback://?"); ok {
			q, err := url.ParseQuery(rest)
			if err != nil {
				fail("fallback URL %s: %v", raw, err)
			}
			raw = q.Get("primary")
		}
		_, rest, _ := strings.Cut(raw, "://")
		rest, _, _ = strings.Cut(rest, "?")
		rest, _, _ = strings.Cut(rest, "/")
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		return strings.Split(rest, ",")
	}
	switch {
	case strings.HasPrefix(k.Store, "redlock-"):
		n, _ := strconv.Atoi(strings.TrimPrefix(k.Store, "redlock-"))
		if len(p.URLs) != k.Groups || k.Nodes != n*k.Groups {
			fail("%d Redlocks of %d counted, %d URLs given", k.Groups, n, len(p.URLs))
		}
		seen := map[string]bool{}
		for _, u := range p.URLs {
			h := hosts(u)
			if len(h) != n {
				fail("URL %s names %d servers, not %d", u, len(h), n)
			}
			for _, s := range h {
				if seen[s] {
					fail("server %s in two Redlocks", s)
				}
				seen[s] = true
			}
		}
		if k.Groups > 1 && !strings.Contains(p.Name, fmt.Sprintf("%d Redlocks", k.Groups)) {
			fail("preset %q does not say it has %d Redlocks", p.Name, k.Groups)
		}
	case k.Store == "redis":
		h := hosts(p.URL)
		switch {
		case len(p.URLs) != 1:
			fail("a Redis design with URLs %q", p.URLs)
		case k.Groups == 1 && len(h) != 1:
			fail("one Redis at %s", p.URL)
		case k.Groups > 1 && (k.Groups < clusterMinMasters || len(h) != clusterMinMasters || !strings.Contains(p.Name, fmt.Sprintf("Redis Cluster of %d masters", k.Groups))):
			fail("a Redis Cluster of %d masters as %q at %s", k.Groups, p.Name, p.URL)
		}
	case k.Store == "etcd" || k.Store == "zookeeper":
		if k.Groups != 1 || k.Nodes != 3 || len(hosts(p.URL)) != 3 || !strings.HasPrefix(p.URL, k.Store+"://") {
			fail("%s: %d ensembles of %d at %s", k.Store, k.Groups, k.Nodes, p.URL)
		}
	case k.Store == "postgres" || k.Store == "mysql":
		if k.Groups != 1 || k.Nodes != 1 || len(p.URLs) != 1 || !strings.HasPrefix(p.URL, k.Store+"://") {
			fail("%s: %d databases at %q", k.Store, k.Nodes, p.URLs)
		}
	case k.Store != "memory":
		fail("store %q", k.Store)
	}
}

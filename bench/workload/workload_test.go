package workload_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=40,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_set:calls=7,usec=1\r\ncmdstat_info:calls=3,usec=9\r\ncmdstat_EVAL:calls=2,usec=1\r\n"
	sum := workload.CommandStats{"set": 1}
	if err := workload.ParseCommandStats(info, sum); err != nil {
		t.Fatal(err)
	}
	if sum["evalsha"] != 10 || sum["set"] != 8 || sum["eval"] != 2 || sum["info"] != 0 {
		t.Errorf("parsed %v", sum)
	}
	if sum.Total() != 20 || sum.Scripts() != 12 {
		t.Errorf("total %d scripts %d, want 20 and 12", sum.Total(), sum.Scripts())
	}
	d := sum.Sub(workload.CommandStats{"evalsha": 4, "set": 8})
	if d["evalsha"] != 6 || d["eval"] != 2 || len(d) != 2 {
		t.Errorf("Sub: %v", d)
	}
	for _, bad := range []string{"cmdstat_get\r\n", "cmdstat_get:usec=1\r\n", "cmdstat_get:calls=x,usec=1\r\n"} {
		if err := workload.ParseCommandStats(bad, workload.CommandStats{}); !errors.Is(err, workload.ErrRedis) {
			t.Errorf("ParseCommandStats(%q) = %v, want ErrRedis", bad, err)
		}
	}
}

func TestParseCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.000000\r\n"
	if v, err := workload.ParseCPU(info); err != nil || v != 3.75 {
		t.Errorf("ParseCPU = %v, %v; want 3.75", v, err)
	}
	for _, bad := range []string{"used_cpu_sys:1\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n", ""} {
		if _, err := workload.ParseCPU(bad); !errors.Is(err, workload.ErrRedis) {
			t.Errorf("ParseCPU(%q) = %v, want ErrRedis", bad, err)
		}
	}
}

// TestCounterURL reads a server that wants a password through a URL
// that carries it, and fails with the server's refusal through a bare
// address.
func TestCounterURL(t *testing.T) {
	srv := testserver.StartRedis(t)
	if _, err := srv.Do("CONFIG", "SET", "requirepass", "s3cret"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := workload.NewCounter([]string{"redis://:s3cret@" + srv.Addr() + "/0"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do(ctx, 0, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Commands["set"] != 1 || s.CPUSeconds <= 0 {
		t.Errorf("sample %+v, want one SET and some CPU time", s)
	}
	if n, err := c.Do(ctx, 0, "DBSIZE"); err != nil || n != "1" {
		t.Errorf("DBSIZE = %q, %v", n, err)
	}
	if _, err := c.Do(ctx, 1, "PING"); !errors.Is(err, workload.ErrUsage) {
		t.Errorf("Do on a server it does not have: %v, want ErrUsage", err)
	}
	if bare, err := workload.NewCounter([]string{srv.Addr()}); err == nil {
		bare.Close()
		t.Error("NewCounter without the password connected")
	} else if !strings.Contains(err.Error(), "NOAUTH") && !strings.Contains(err.Error(), "auth") {
		t.Errorf("NewCounter without the password: %v", err)
	}
	if _, err := workload.NewCounter([]string{"redis://:s3cret@" + srv.Addr() + "/x"}); !errors.Is(err, workload.ErrUsage) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("NewCounter on a bad URL: %v, want ErrUsage without the password", err)
	}
}

func TestParseBenchmarkCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms"` + "\n" + `"EVALSHA abc 1 k v 1000","178571.42","4.127","0.392"` + "\n"
	v, err := workload.ParseBenchmarkCSV(out)
	if err != nil || v != 178571.42 {
		t.Errorf("got %v, %v", v, err)
	}
	if _, err := workload.ParseBenchmarkCSV(`"test","rps"` + "\n"); !errors.Is(err, workload.ErrRedis) {
		t.Errorf("no figure: %v, want ErrRedis", err)
	}
}

func TestFairness(t *testing.T) {
	lo, hi, jain := workload.Fairness([]int64{10, 10, 10, 10})
	if lo != 10 || hi != 10 || jain != 1 {
		t.Errorf("even: %d %d %v", lo, hi, jain)
	}
	lo, hi, jain = workload.Fairness([]int64{0, 0, 0, 8})
	if lo != 0 || hi != 8 || math.Abs(jain-0.25) > 1e-9 {
		t.Errorf("one worker did all: %d %d %v", lo, hi, jain)
	}
}

func TestRunRefusesBadCells(t *testing.T) {
	good := workload.Cell{
		Workload: workload.Workload{Name: "w", Concurrency: 1, Nodes: 1},
		Library:  workload.Turnstile(),
		Addrs:    []string{"127.0.0.1:1"},
		Duration: time.Second,
	}
	one := func(f func(*workload.Cell)) workload.Cell { c := good; f(&c); return c }
	for name, c := range map[string]workload.Cell{
		"no name":          one(func(c *workload.Cell) { c.Workload.Name = "" }),
		"no workers":       one(func(c *workload.Cell) { c.Workload.Concurrency = 0 }),
		"negative hold":    one(func(c *workload.Cell) { c.Workload.Hold = -1 }),
		"uneven processes": one(func(c *workload.Cell) { c.Workload.Concurrency, c.Workload.Processes = 3, 2 }),
		"negative clients": one(func(c *workload.Cell) { c.Workload.Clients = -1 }),
		"uneven clients":   one(func(c *workload.Cell) { c.Workload.Concurrency, c.Workload.Clients = 6, 4 }),
		"clients ÷ processes": one(func(c *workload.Cell) {
			c.Workload.Concurrency, c.Workload.Clients, c.Workload.Processes = 20, 4, 5
		}),
		"addresses ≠ nodes": one(func(c *workload.Cell) { c.Workload.Nodes = 3 }),
		"no duration":       one(func(c *workload.Cell) { c.Duration = 0 }),
		"no library":        one(func(c *workload.Cell) { c.Library = workload.Library{} }),
		"single-node on 2": one(func(c *workload.Cell) {
			c.Workload.Nodes, c.Addrs = 2, []string{"a:1", "b:2"}
			c.Library.MultiNode = false
		}),
		"cluster of 2": one(func(c *workload.Cell) {
			c.Workload.Nodes, c.Workload.Cluster, c.Addrs = 2, true, []string{"a:1", "b:2"}
		}),
		"cluster in processes": one(func(c *workload.Cell) {
			c.Workload.Nodes, c.Workload.Cluster, c.Addrs = 3, true, []string{"a:1", "b:2", "c:3"}
			c.Workload.Concurrency, c.Workload.Processes = 2, 2
		}),
		"no cluster client": one(func(c *workload.Cell) {
			c.Workload.Nodes, c.Workload.Cluster, c.Addrs = 3, true, []string{"a:1", "b:2", "c:3"}
			c.Library.OpenCluster = nil
		}),
	} {
		if _, err := workload.Run(context.Background(), c); !errors.Is(err, workload.ErrUsage) {
			t.Errorf("%s: %v, want ErrUsage", name, err)
		}
	}
}

// TestRunTurnstile runs a one-key cell with a hold: every figure is
// filled in, and the commands counted are the ones the cell sent.
func TestRunTurnstile(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	res, err := workload.Run(ctx, workload.Cell{
		Workload: workload.Workload{Name: "contended-1", Concurrency: 4, HotKeys: 1, Hold: 100 * time.Microsecond, Nodes: 1},
		Library:  workload.Turnstile(),
		Addrs:    []string{srv.Addr()},
		Duration: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquisitions == 0 || res.Errors != 0 || res.Library != "turnstile" || res.ID != "contended-1/c=4" {
		t.Fatalf("result: %+v", res)
	}
	// Scripts went to the server, though fewer than one per acquisition:
	// the Client hands the hot key to its own waiters without the store.
	if res.ScriptsPerAcq <= 0 || res.CommandsPerAcq < res.ScriptsPerAcq || res.HandoffGapMicros <= 0 || res.FairMax < res.FairMin {
		t.Errorf("result: %+v", res)
	}
	// The server's CPU time is read around the cell: some per pair, and
	// no more than the machine's cores over the cell.
	if res.ServerCPUMicrosPerAcq <= 0 || res.ServerCores <= 0 || res.ServerCores > float64(runtime.NumCPU())+0.5 {
		t.Errorf("server CPU %.1f µs/acq, %.2f cores", res.ServerCPUMicrosPerAcq, res.ServerCores)
	}
	if res.PerAcq["info"] != 0 {
		t.Errorf("INFO counted: %v", res.PerAcq)
	}
}

// TestRunCluster runs an uncontended cell on a Redis Cluster: the keys
// spread over the masters, and every master's commands and CPU are
// counted.
func TestRunCluster(t *testing.T) {
	t.Cleanup(func() { testserver.AwaitRueidisTimers(t) }) // runs last: after the cluster client closed
	cl := testserver.StartRedisCluster(t)
	res, err := workload.Run(context.Background(), workload.Cell{
		Workload: workload.Workload{Name: "cluster-3", Concurrency: 8, Nodes: testserver.ClusterMasters, Cluster: true},
		Library:  workload.Turnstile(),
		Addrs:    cl.Addrs(),
		Duration: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquisitions == 0 || res.Errors != 0 || !res.Cluster || res.Nodes != testserver.ClusterMasters {
		t.Fatalf("result: %+v", res)
	}
	if res.ScriptsPerAcq < 1.9 || res.ServerCPUMicrosPerAcq <= 0 {
		t.Errorf("%.2f scripts and %.1f µs of server CPU per pair", res.ScriptsPerAcq, res.ServerCPUMicrosPerAcq)
	}
	for _, n := range cl.Nodes() {
		out, err := n.Do("DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		if out == "0" {
			t.Errorf("master %s holds no key: the cell did not spread over the cluster", n.Addr())
		}
	}
}

func TestLimitAndScaleRefuseBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := workload.Limit(ctx, "127.0.0.1:1", 0, 1); !errors.Is(err, workload.ErrUsage) && !errors.Is(err, workload.ErrNoRedisBenchmark) {
		t.Errorf("Limit with 0 requests: %v", err)
	}
	if _, err := workload.Scale(ctx, "redis://127.0.0.1:1", "127.0.0.1:1", 0, time.Second); !errors.Is(err, workload.ErrUsage) {
		t.Errorf("Scale with 0 leases: %v", err)
	}
	if _, err := workload.OpenTurnstile(ctx, "nosuch://x"); err == nil || !strings.Contains(err.Error(), "turnstile") {
		t.Errorf("OpenTurnstile on an unknown scheme: %v", err)
	}
}

// TestRunInterrupted: a cell whose context ends early still reports what
// it measured, and leaves no lock held (warm-up's included).
func TestRunInterrupted(t *testing.T) {
	srv := testserver.StartRedis(t)
	// Long enough for the library to open and warm up on a busy machine,
	// far shorter than the cell's minute.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	res, err := workload.Run(ctx, workload.Cell{
		Workload: workload.Workload{Name: "uncontended", Concurrency: 4, Nodes: 1},
		Library:  workload.Turnstile(),
		Addrs:    []string{srv.Addr()},
		Duration: time.Minute,
	})
	if err != nil {
		t.Fatalf("interrupted cell: %v", err)
	}
	if res.Acquisitions == 0 || res.Seconds > 10 {
		t.Errorf("interrupted cell: %d acquisitions in %.1f s", res.Acquisitions, res.Seconds)
	}
	c, err := workload.NewCounter([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := c.Do(context.Background(), 0, "EVAL",
		"local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do if not string.find(k, ':fence', 1, true) then n = n + 1 end end return n", "0")
	if err != nil || held != "0" {
		t.Errorf("%s keys other than fences left (%v)", held, err)
	}
}

// counting is a Library that opens Lockers of lib and counts, per
// Locker, the acquisitions on keys other than the warm-up's.
type counting struct {
	lib     workload.Library
	mu      sync.Mutex
	opened  []int // each Open's concurrency
	lockers []*countingLocker
}

type countingLocker struct {
	workload.Locker
	n atomic.Int64
}

func (c *counting) library() workload.Library {
	l := c.lib
	l.Open = func(ctx context.Context, addrs []string, concurrency int) (workload.Locker, error) {
		lk, err := c.lib.Open(ctx, addrs, concurrency)
		if err != nil {
			return nil, err
		}
		cl := &countingLocker{Locker: lk}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.opened = append(c.opened, concurrency)
		c.lockers = append(c.lockers, cl)
		return cl, nil
	}
	return l
}

func (l *countingLocker) Acquire(ctx context.Context, key string) (workload.Held, error) {
	h, err := l.Locker.Acquire(ctx, key)
	if err == nil && !strings.Contains(key, ":warm:") {
		l.n.Add(1)
	}
	return h, err
}

// TestRunClients: a cell with Clients opens that many Lockers, each for
// its share of the workers, and counts the acquisitions of every one of
// them.
func TestRunClients(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := &counting{lib: workload.Turnstile()}
	res, err := workload.Run(context.Background(), workload.Cell{
		Workload: workload.Workload{Name: "contended-1", Concurrency: 6, HotKeys: 1, Nodes: 1, Clients: 3},
		Library:  c.library(),
		Addrs:    []string{srv.Addr()},
		Duration: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "contended-1/c=6/clients=3" || res.Clients != 3 || res.Processes != 1 || res.Errors != 0 {
		t.Fatalf("result: %+v", res)
	}
	if !slices.Equal(c.opened, []int{2, 2, 2}) {
		t.Errorf("Open called with concurrency %v, want three clients of 2 workers", c.opened)
	}
	var sum int64
	for i, l := range c.lockers {
		n := l.n.Load()
		if n == 0 {
			t.Errorf("client %d: no acquisition", i)
		}
		sum += n
	}
	if sum != res.Acquisitions || res.FairMin == 0 || res.Jain <= 0 {
		t.Errorf("clients acquired %d times, the result counts %d; fairness %d/%d, Jain %.3f", sum, res.Acquisitions, res.FairMin, res.FairMax, res.Jain)
	}
}

// The turnstile rows run with TTL 8 s, and wait for a held lock until
// their context ends: past the retries of turnstile's default backoff
// (10 of at most 10 ms … 1 s each, 4.27 s in all).
func TestTurnstileSettings(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	for _, lib := range []workload.Library{workload.Turnstile(), workload.TurnstileSharedBackoff(), workload.TurnstileGoRedis()} {
		t.Run(lib.Name, func(t *testing.T) {
			t.Parallel()
			lk, err := lib.Open(ctx, []string{srv.Addr()}, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			key := "settings:" + lib.Name
			h, err := lk.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := h.(interface{ Validity() time.Duration })
			if !ok {
				t.Fatalf("%T has no Validity", h)
			}
			if d := v.Validity(); d <= 7*time.Second || d > workload.TTL {
				t.Errorf("validity %v, want a little under %v", d, workload.TTL)
			}
			// Held by another client for longer than turnstile's default
			// retries could wait.
			other, err := lib.Open(ctx, []string{srv.Addr()}, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			const held = 4500 * time.Millisecond
			time.AfterFunc(held, func() { _ = h.Release(ctx) })
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			start := time.Now()
			h2, err := other.Acquire(wctx, key)
			if err != nil {
				t.Fatalf("waiting %v for a held lock: %v", time.Since(start).Round(time.Millisecond), err)
			}
			if d := time.Since(start); d < held-100*time.Millisecond {
				t.Errorf("acquired after %v, before the release at %v", d, held)
			}
			_ = h2.Release(ctx)
		})
	}
}

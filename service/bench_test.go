package service_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

// The service against the library used directly, and against etcd's own
// lock service. docs/performance.md reports the figures and what bounds
// each:
//
//	cd service && go test -run '^$' -bench . -benchtime 5s
//
// Every cell is TryAcquire+Release pairs on keys nobody else uses
// (locktest.Pairs): one op is one pair. The instance is a real
// "turnstile serve" process beside the store, so that its CPU is paid as
// in production, on the same machine as everything else.

var workerCounts = []int{1, 16, 64}

// BenchmarkRedis: turnstile's Client on a redis-server, directly and
// through "turnstile serve" over the same server.
func BenchmarkRedis(b *testing.B) {
	srv := testserver.StartRedis(b)
	p := startServe(b, "--backend", srv.URL())
	ctx := context.Background()
	direct, err := turnstile.Open(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = direct.Close() })
	through, err := turnstile.Open(ctx, "turnstile://"+p.addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = through.Close() })
	store, server := procCPU(srv.PID()), procCPU(p.cmd.Process.Pid)
	for _, n := range append(workerCounts, 256) {
		b.Run(fmt.Sprintf("direct/workers=%d", n), func(b *testing.B) { pairs(b, n, leases(direct), noCPU, store) })
		b.Run(fmt.Sprintf("service/workers=%d", n), func(b *testing.B) { pairs(b, n, leases(through), server, store) })
	}
	// One hot key: every worker waits for it (Acquire) and releases it.
	b.Run("direct/hot-key/workers=64", func(b *testing.B) { pairs(b, 64, hotKey(direct), noCPU, store) })
	b.Run("service/hot-key/workers=64", func(b *testing.B) { pairs(b, 64, hotKey(through), server, store) })
	// A watchdog's batch of renewals.
	b.Run("direct/renewals=64", func(b *testing.B) { renewals(b, direct, 64, noCPU, store) })
	b.Run("service/renewals=64", func(b *testing.B) { renewals(b, through, 64, server, store) })
}

// renewals: one op is a batch of n renewals of leases c holds, as its
// watchdog sends those that fall due together (driver.BatchExtender),
// with the CPU each renewal cost reported as pairs reports a pair's.
func renewals(b *testing.B, c *turnstile.Client, n int, others ...cpuClock) {
	be, ok := c.Backend().(driver.BatchExtender)
	if !ok {
		b.Fatalf("%T renews one lease at a time", c.Backend())
	}
	ctx := context.Background()
	reqs := make([]driver.ExtendRequest, n)
	prefix := "bench:renew:" + strconv.FormatUint(rand.Uint64(), 36)
	for i := range reqs {
		reqs[i] = driver.ExtendRequest{Key: fmt.Sprintf("%s:%d", prefix, i), Owner: "renewer", TTL: time.Minute}
		if _, ok, err := c.Backend().Acquire(ctx, reqs[i].Key, reqs[i].Owner, reqs[i].TTL); !ok || err != nil {
			b.Fatalf("acquire %s: ok=%v err=%v", reqs[i].Key, ok, err)
		}
	}
	b.Cleanup(func() {
		for _, r := range reqs {
			_, _ = c.Backend().Release(ctx, r.Key, r.Owner)
		}
	})
	cpu0 := cpuTimes(b, others)
	for b.Loop() {
		for _, r := range be.ExtendMany(ctx, reqs) {
			if !r.OK || r.Err != nil {
				b.Fatalf("renewal: ok=%v err=%v", r.OK, r.Err)
			}
		}
	}
	cpu1 := cpuTimes(b, others)
	for i := range cpu1 {
		unit := strings.Replace(cpuUnits[min(i, len(cpuUnits)-1)], "/pair", "/renewal", 1)
		b.ReportMetric(float64((cpu1[i]-cpu0[i]).Microseconds())/float64(b.N*n), unit)
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "renewals/s")
}

// hotKey is an acquisition for pairs: Acquire of c on one key all the
// workers share, waiting as long as it takes, released by the lease.
func hotKey(c *turnstile.Client) func(context.Context, *rand.Rand) (func() error, error) {
	key := "bench:hot:" + strconv.FormatUint(rand.Uint64(), 36)
	forever := turnstile.WithBackoff(turnstile.Exponential{Base: turnstile.DefaultBackoffBase, Cap: turnstile.DefaultBackoffCap, MaxRetries: -1})
	return func(ctx context.Context, _ *rand.Rand) (func() error, error) {
		l, err := c.Acquire(ctx, key, forever)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Release(ctx) }, nil
	}
}

// BenchmarkEtcd: etcd's own lock service (v3lock, built into the etcd
// server) against "turnstile serve --backend etcd://" on the same etcd.
// v3lock gets its best case: one lease per worker, granted once and kept
// alive, so a pair is its Lock and Unlock alone; turnstile's pairs are
// its Client's TryAcquire and Release through the service.
func BenchmarkEtcd(b *testing.B) { etcdCells(b, false) }

// BenchmarkEtcdOwnCore: BenchmarkEtcd with etcd on a core of its own —
// the first CPU, every thread of it — and everything else (this process,
// the instance) on the others, as where etcd runs on machines of its own
// and its CPU is what bounds a lock service over it. Both sides get the
// same cores.
func BenchmarkEtcdOwnCore(b *testing.B) { etcdCells(b, true) }

func etcdCells(b *testing.B, ownCore bool) {
	srv := testserver.StartEtcd(b)
	p := startServe(b, "--backend", srv.URL())
	if ownCore {
		n := runtime.NumCPU()
		if n < 2 {
			b.Fatalf("etcd on a core of its own needs 2 CPUs; this machine has %d", n)
		}
		var first, rest unix.CPUSet
		first.Set(0)
		for i := 1; i < n; i++ {
			rest.Set(i)
		}
		var all unix.CPUSet
		if err := unix.SchedGetaffinity(0, &all); err != nil {
			b.Fatal(err)
		}
		pin(b, srv.PID(), &first)
		pin(b, p.cmd.Process.Pid, &rest)
		pin(b, os.Getpid(), &rest)
		b.Cleanup(func() { pin(b, os.Getpid(), &all) })
	}
	ctx := context.Background()
	through, err := turnstile.Open(ctx, "turnstile://"+p.addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = through.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	store, server := procCPU(srv.PID()), procCPU(p.cmd.Process.Pid)
	for _, n := range workerCounts {
		b.Run(fmt.Sprintf("v3lock/workers=%d", n), func(b *testing.B) { v3lockPairs(b, cli, n, store) })
		b.Run(fmt.Sprintf("service/workers=%d", n), func(b *testing.B) { pairs(b, n, leases(through), server, store) })
	}
}

// pin sets the CPUs of every thread of process pid; the threads it
// starts later inherit them from their parent thread.
func pin(b *testing.B, pid int, set *unix.CPUSet) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			b.Fatalf("pin thread %d of %d: %v", tid, pid, err)
		}
	}
}

// v3lockPairs runs Lock+Unlock pairs of etcd's v3lock service from
// workers goroutines, each with a lease of its own kept alive meanwhile,
// on names nobody else uses, and reports them as locktest.Pairs does.
func v3lockPairs(b *testing.B, cli *clientv3.Client, workers int, store cpuClock) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leases := make([]clientv3.LeaseID, workers)
	for i := range leases {
		l, err := cli.Grant(ctx, 30)
		if err != nil {
			b.Fatal(err)
		}
		ka, err := cli.KeepAlive(ctx, l.ID)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range ka {
			}
		}()
		leases[i] = l.ID
	}
	conn := cli.ActiveConnection()
	prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
	var mu sync.Mutex
	next := 0
	pairs(b, workers, func(ctx context.Context, r *rand.Rand) (func() error, error) {
		mu.Lock()
		lease := leases[next%workers]
		next++
		mu.Unlock()
		name := prefix + strconv.FormatUint(r.Uint64(), 36)
		key, err := v3lock(ctx, conn, name, lease)
		if err != nil {
			return nil, err
		}
		return func() error { return v3unlock(ctx, conn, key) }, nil
	}, noCPU, store)
}

// leases is an acquisition for pairs: TryAcquire of c on a key nobody
// else uses, released by the lease.
func leases(c *turnstile.Client) func(context.Context, *rand.Rand) (func() error, error) {
	prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
	return func(ctx context.Context, r *rand.Rand) (func() error, error) {
		l, err := c.TryAcquire(ctx, prefix+strconv.FormatUint(r.Uint64(), 36))
		if err != nil {
			return nil, err
		}
		return func() error { return l.Release(ctx) }, nil
	}
}

// pairs is locktest.PairsFunc, with the CPU each pair cost reported
// beside it: this process (the client, and an instance served in it) and
// the other processes given.
func pairs(b *testing.B, workers int, acquire func(ctx context.Context, r *rand.Rand) (release func() error, err error), others ...cpuClock) {
	cpu0 := cpuTimes(b, others)
	locktest.PairsFunc(b, workers, acquire)
	cpu1 := cpuTimes(b, others)
	for i := range cpu1 {
		b.ReportMetric(float64((cpu1[i]-cpu0[i]).Microseconds())/float64(b.N), cpuUnits[min(i, len(cpuUnits)-1)])
	}
}

var cpuUnits = []string{"client-cpu-µs/pair", "server-cpu-µs/pair", "store-cpu-µs/pair"}

// cpuClock reads the CPU time another process used so far.
type cpuClock func(b *testing.B) time.Duration

// noCPU stands for a process a cell does not have (the instance, in the
// cells without one).
func noCPU(*testing.B) time.Duration { return 0 }

// cpuTimes reads this process's CPU time, then each of others'.
func cpuTimes(b *testing.B, others []cpuClock) []time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	out := []time.Duration{time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	for _, o := range others {
		out = append(out, o(b))
	}
	return out
}

// procCPU reads the CPU time of process pid from /proc (Linux), in
// clock ticks of 10 ms.
func procCPU(pid int) cpuClock {
	return func(b *testing.B) time.Duration {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		// The fields after the command's name, which ends with ')'.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * 10 * time.Millisecond
	}
}

// rawCodec passes the messages of v3lock, encoded by hand, through gRPC:
// etcd's Go module for v3lock lives in its server module, too big to
// pull in for two messages.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// v3lock calls v3lockpb.Lock/Lock{name: 1, lease: 2} and returns the
// key of its answer (field 2).
func v3lock(ctx context.Context, conn *grpc.ClientConn, name string, lease clientv3.LeaseID) ([]byte, error) {
	req := protowire.AppendTag(nil, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, []byte(name))
	req = protowire.AppendTag(req, 2, protowire.VarintType)
	req = protowire.AppendVarint(req, uint64(lease))
	var resp []byte
	if err := conn.Invoke(ctx, "/v3lockpb.Lock/Lock", &req, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
		return nil, err
	}
	for len(resp) > 0 {
		num, typ, n := protowire.ConsumeTag(resp)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		resp = resp[n:]
		if num == 2 && typ == protowire.BytesType {
			key, n := protowire.ConsumeBytes(resp)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			return key, nil
		}
		n = protowire.ConsumeFieldValue(num, typ, resp)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		resp = resp[n:]
	}
	return nil, fmt.Errorf("v3lock Lock answered no key")
}

// v3unlock calls v3lockpb.Lock/Unlock{key: 1}.
func v3unlock(ctx context.Context, conn *grpc.ClientConn, key []byte) error {
	req := protowire.AppendTag(nil, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, key)
	var resp []byte
	return conn.Invoke(ctx, "/v3lockpb.Lock/Unlock", &req, &resp, grpc.ForceCodec(rawCodec{}))
}

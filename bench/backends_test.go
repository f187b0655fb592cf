package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"

	_ "github.com/turnstilelock/turnstile/etcd"
	_ "github.com/turnstilelock/turnstile/mysql"
	_ "github.com/turnstilelock/turnstile/postgres"
	_ "github.com/turnstilelock/turnstile/redis"
	_ "github.com/turnstilelock/turnstile/redlock"
	_ "github.com/turnstilelock/turnstile/zookeeper"
)

// workers is how many goroutines every store serves at once.
const workers = 16

// store is one backend under test: start brings up its servers, on t,
// and returns the turnstile URL that reaches them.
type store struct {
	name  string
	start func(t testing.TB) string
}

var stores = []store{
	{"memory", func(testing.TB) string { return "mem://" }},
	{"redis", func(t testing.TB) string { return testserver.StartRedis(t).URL() }},
	{"redlock-3", func(t testing.TB) string { return redlockURL(t, 3) }},
	{"redlock-5", func(t testing.TB) string { return redlockURL(t, 5) }},
	{"etcd", func(t testing.TB) string { return testserver.StartEtcd(t).URL() }},
	{"zookeeper", func(t testing.TB) string { return "zookeeper://" + testserver.StartZooKeeper(t).Addr() }},
	{"postgres", func(t testing.TB) string { return testserver.StartPostgres(t).URL() }},
	{"mysql", func(t testing.TB) string { return testserver.StartMySQL(t).URL() }},
}

// redlockURL starts n independent redis-server processes and returns the
// redlock URL naming them all. The restart quarantine is off: it keeps a
// restarted node from granting locks for a TTL, and these nodes have only
// just started, holding no lock anyone could lose.
func redlockURL(t testing.TB, n int) string {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = testserver.StartRedis(t).Addr()
	}
	return "redlock://" + strings.Join(addrs, ",") + "?quarantine=0"
}

// BenchmarkBackends compares every lock backend on one machine: per store,
// exactly 16 goroutines each TryAcquire and Release locks on distinct
// random keys, b.N pairs in all. It reports pairs/s (wall clock, all
// goroutines together) and the 50th and 99th percentile latency of one
// TryAcquire in microseconds. Run it with
//
//	cd bench && go test -run '^$' -bench Backends -benchtime 2s
//
// Every server is started once, when its sub-benchmark first runs, and
// stopped when the whole benchmark ends. A store whose server binary is
// missing fails its sub-benchmark with the command that installs it.
func BenchmarkBackends(b *testing.B) {
	for _, s := range stores {
		var (
			once   sync.Once
			client *turnstile.Client
		)
		b.Run(s.name, func(sb *testing.B) {
			// The testing package runs a sub-benchmark's cleanups after
			// every round of b.N, so servers and client belong to the
			// parent b; only a failure to start is the sub-benchmark's.
			once.Do(func() {
				p := &parentTB{TB: b, sub: sb}
				url := s.start(p)
				c, err := turnstile.Open(context.Background(), url)
				if err != nil {
					sb.Fatalf("open %s: %v", url, err)
				}
				b.Cleanup(func() { _ = c.Close() })
				client = c
			})
			if client == nil {
				sb.Fatal("store did not start")
			}
			run(sb, client)
		})
	}
}

// run has workers goroutines share sb.N TryAcquire+Release pairs on c
// (locktest.Pairs, the benchmark every backend's own tests run too).
func run(sb *testing.B, c *turnstile.Client) {
	locktest.Pairs(sb, workers, locktest.DistinctKeys(c))
}

// parentTB lends a sub-benchmark's servers to the parent benchmark, so
// they outlive the sub-benchmark's rounds, while a failure to start them
// fails the sub-benchmark.
type parentTB struct {
	testing.TB
	sub *testing.B
}

func (p *parentTB) Helper()                   {}
func (p *parentTB) Fatal(args ...any)         { p.sub.Helper(); p.sub.Fatal(args...) }
func (p *parentTB) Fatalf(f string, a ...any) { p.sub.Helper(); p.sub.Fatalf(f, a...) }
func (p *parentTB) Error(args ...any)         { p.sub.Helper(); p.sub.Error(args...) }
func (p *parentTB) Errorf(f string, a ...any) { p.sub.Helper(); p.sub.Errorf(f, a...) }
func (p *parentTB) FailNow()                  { p.sub.FailNow() }
func (p *parentTB) Fail()                     { p.sub.Fail() }

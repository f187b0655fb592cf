package redis_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// The one-line scripts of the simplest lock with an owner check: what an
// uncontended pair costs with nothing but two round trips.
const (
	floorAcquireSrc = `return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0`
	floorReleaseSrc = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
)

var (
	floorAcquire = rueidis.NewLuaScript(floorAcquireSrc)
	floorRelease = rueidis.NewLuaScript(floorReleaseSrc)
)

// pairCase is one way of running an uncontended acquire+release pair on
// key.
type pairCase struct {
	name string
	pair func(key string) error
}

// BenchmarkPairParts is where one uncontended acquire+release pair's
// time goes at one goroutine (docs/performance.md, "One worker, one
// node"). Each case has a client of its own, so that no case inherits
// another's connection mode, and the cases run in turns of 64 pairs, so
// that a machine whose speed drifts (other processes) moves them alike.
// Each case reports the median over the turns of its µs per pair:
//
//   - floor-sync: two one-line scripts over rueidis, on its lone
//     caller's synchronous path (the caller writes and reads the
//     connection itself);
//   - floor-background: the same after a call whose context could end
//     without a deadline put the connection in rueidis's background mode
//     for good: a writer and a reader goroutine, two more goroutine
//     handoffs per round trip;
//   - goredis-floor: the same two scripts over a go-redis pool, the
//     peers' path (a SET NX PX alone would save the first script);
//   - backend: the Backend's Acquire and Release, turnstile's scripts;
//   - backend-after-notice: the same on a Backend that once subscribed
//     to release notices (Released), which rueidis serves on the first
//     of its connections in background mode from then on;
//   - client: a turnstile.Client's Acquire and Release over the Backend.
func BenchmarkPairParts(b *testing.B) {
	srv := testserver.StartRedis(b)
	bg := context.Background()
	cancellable, cancel := context.WithCancel(bg)
	defer cancel()
	deadline, cancel2 := context.WithTimeout(bg, time.Hour)
	defer cancel2()

	floor := func(ctx context.Context) func(string) error {
		c := rueidisClient(b, srv)
		return func(key string) error {
			if err := floorAcquire.Exec(ctx, c, []string{key}, []string{"me", "8000"}).Error(); err != nil {
				return err
			}
			return floorRelease.Exec(ctx, c, []string{key}, []string{"me"}).Error()
		}
	}
	gr := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = gr.Close() })
	grAcquire, grRelease := goredis.NewScript(floorAcquireSrc), goredis.NewScript(floorReleaseSrc)
	be := dial(b, srv)
	noticed := dial(b, srv)
	_, stop, err := noticed.Released(bg, "pair:noticed")
	if err != nil {
		b.Fatal(err)
	}
	stop()
	c, err := turnstile.New(dial(b, srv), turnstile.WithTTL(8*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	cases := []pairCase{
		{"floor-sync", floor(bg)},
		{"floor-background", floor(cancellable)},
		{"goredis-floor", func(key string) error {
			if err := grAcquire.Run(deadline, gr, []string{key}, "me", 8000).Err(); err != nil {
				return err
			}
			return grRelease.Run(deadline, gr, []string{key}, "me").Err()
		}},
		{"backend", func(key string) error {
			if _, ok, err := be.Acquire(deadline, key, "me", 8*time.Second); err != nil || !ok {
				return err
			}
			_, err := be.Release(deadline, key, "me")
			return err
		}},
		{"backend-after-notice", func(key string) error {
			if _, ok, err := noticed.Acquire(deadline, key, "me", 8*time.Second); err != nil || !ok {
				return err
			}
			_, err := noticed.Release(deadline, key, "me")
			return err
		}},
		{"client", func(key string) error {
			l, err := c.Acquire(deadline, key)
			if err != nil {
				return err
			}
			return l.Release(deadline)
		}},
	}
	const turn = 64
	perPair := make([][]float64, len(cases))
	n := 0
	for b.Loop() {
		for i, pc := range cases {
			start := time.Now()
			for range turn {
				n++
				if err := pc.pair("pair:" + strconv.Itoa(n)); err != nil {
					b.Fatalf("%s: %v", pc.name, err)
				}
			}
			perPair[i] = append(perPair[i], float64(time.Since(start).Microseconds())/turn)
		}
	}
	for i, pc := range cases {
		slices.Sort(perPair[i])
		b.ReportMetric(perPair[i][len(perPair[i])/2], pc.name+"-µs/pair")
	}
}

package redis_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestSubscriptionsEndUnderAFlood: ending a waiter's subscription while
// its key's release notices keep coming neither stalls the client's
// other commands (the subscription's notices are drained until the
// server confirms the unsubscribe) nor leaves the server subscribed. A
// subscription left on the server would feed the next one on the same
// channel notices before its own confirmation, which could fill the
// client library's buffer and stop its connection for good.
func TestSubscriptionsEndUnderAFlood(t *testing.T) {
	srv, b := startDialled(t)
	ctx := ctxFor(t, 2*time.Minute)
	const k = "flooded"
	pub := rueidisClient(t, srv)
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	wg.Go(func() { // notices of k as fast as one connection sends them
		for !stop.Load() {
			cmds := make([]rueidis.Completed, 0, 64)
			for range 64 {
				cmds = append(cmds, pub.B().Spublish().Channel(channelKey(k)).Message("1").Build())
			}
			pub.DoMulti(context.Background(), cmds...)
		}
	})
	// A prober runs the client's lock commands throughout.
	var worst atomic.Int64
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			start := time.Now()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, _, err := b.Acquire(pctx, "probe", "p"+strconv.Itoa(i), time.Minute)
			if err == nil {
				_, err = b.Release(pctx, "probe", "p"+strconv.Itoa(i))
			}
			cancel()
			if err != nil && !stop.Load() {
				t.Errorf("probe %d: %v", i, err)
				return
			}
			if d := time.Since(start); int64(d) > worst.Load() {
				worst.Store(int64(d))
			}
		}
	})
	for i := range 20 {
		_, end, err := b.Released(ctx, k)
		if err != nil {
			t.Fatalf("Released %d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
		end()
	}
	time.Sleep(500 * time.Millisecond) // the last unsubscribe on its way
	stop.Store(true)
	wg.Wait()
	// The old way blocked the connection for the unsubscribe's whole
	// timeout (2 s) at every end; a descheduled probe may take a while,
	// but not that long.
	if w := time.Duration(worst.Load()); w > 1500*time.Millisecond {
		t.Errorf("a lock command took %v while subscriptions ended under a flood of notices", w)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := strconv.Atoi(srv.MustDo(t, "EVAL", "return redis.call('PUBSUB', 'SHARDNUMSUB', KEYS[1])[2]", "1", channelKey(k)))
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions to %s left on the server after every waiter stopped", n, channelKey(k))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

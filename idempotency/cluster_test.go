package idempotency_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/idempotency"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// Keys spread over every node of a Redis Cluster: each script touches one
// key, so each runs on the node that owns it.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	cl := testserver.StartRedisCluster(t)
	// One seed address: the client learns the other nodes from it. With
	// several seeds a rueidis cluster client keeps a goroutine for seconds
	// after Close to drop the surplus connection, which the leak check in
	// TestMain would report.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()[:1], DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	s, err := idempotency.NewRedis(c, idempotency.WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	const keys, dups = 30, 10
	var runs [keys]atomic.Int64
	var wg sync.WaitGroup
	calls := make([][dups]call, keys)
	for i := range keys {
		key := key(t, fmt.Sprint(i))
		fn := func(context.Context) ([]byte, error) {
			runs[i].Add(1)
			time.Sleep(20 * time.Millisecond)
			return fmt.Appendf(nil, "result-%d", i), nil
		}
		for j := range dups {
			wg.Go(func() {
				r, rep, err := s.Do(ctx, key, fn)
				calls[i][j] = call{r, rep, err}
			})
		}
	}
	wg.Wait()
	for i := range keys {
		if n := runs[i].Load(); n != 1 {
			t.Errorf("key %d: fn ran %d times, want 1", i, n)
		}
		for _, c := range calls[i] {
			if c.err != nil || string(c.result) != fmt.Sprintf("result-%d", i) {
				t.Errorf("key %d: Do = (%q, %v), want result-%d", i, c.result, c.err, i)
			}
		}
	}
}

package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestBackendsShareSubscriptions: two Backends over one client listen on
// one key; when one stops, the other still hears every release.
func TestBackendsShareSubscriptions(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxFor(t, 30*time.Second)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	a, err := redis.New(client)
	if err != nil {
		t.Fatal(err)
	}
	b, err := redis.New(client)
	if err != nil {
		t.Fatal(err)
	}
	chA, stopA, err := a.Released(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	chB, stopB, err := b.Released(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	stopA()
	_ = a.Close()
	_ = chA
	for i := range 3 {
		if _, ok, err := b.Acquire(ctx, "shared", "o", time.Minute); !ok || err != nil {
			t.Fatalf("acquire %d: %v %v", i, ok, err)
		}
		if _, ok, err := b.Acquire(ctx, "shared", "waiter", time.Minute); ok || err != nil {
			t.Fatalf("a second owner's acquire %d: %v %v", i, ok, err)
		}
		if ok, err := b.Release(ctx, "shared", "o"); !ok || err != nil {
			t.Fatalf("release %d: %v %v", i, ok, err)
		}
		awaitNotice(t, chB, fmt.Sprintf("release %d: no notice after the other Backend stopped listening", i))
		// Drain a wake-up that a re-subscription may add.
		select {
		case <-chB:
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = b.Close()
	_ = context.Background()
}

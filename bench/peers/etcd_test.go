package peers_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestEtcdMutex: etcd's concurrency.Mutex, a session per worker, excludes
// its workers from one key, refuses anything but one endpoint, and
// closes its sessions and client.
func TestEtcdMutex(t *testing.T) {
	checkRecipe(t, peers.EtcdMutex(), testserver.StartEtcd(t).Addr())
}

// checkRecipe checks a store's own lock recipe lib on the server at addr:
// it refuses two addresses, its workers exclude one another from one
// key, and it closes cleanly.
func checkRecipe(t *testing.T, lib workload.Library, addr string) {
	t.Helper()
	if _, err := lib.Open(context.Background(), []string{addr, addr}, 1); !errors.Is(err, workload.ErrUsage) {
		t.Fatalf("two addresses: %v, want ErrUsage", err)
	}
	const workers = 4
	lk, err := lib.Open(context.Background(), []string{addr}, workers)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lk.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range 5 {
				h, err := lk.Acquire(ctx, "hot")
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := h.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d acquisitions while another worker held the lock", n)
	}
}

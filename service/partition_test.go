//go:build !race

package service_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// partition is a TCP proxy in front of upstream that can drop everything
// both ways — a partition: connections stay open, nothing arrives, new
// connections are accepted and hear nothing.
type partition struct {
	p *toxiproxy.Proxy
}

func newPartition(t *testing.T, name, upstream string) *partition {
	t.Helper()
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(api, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	pt := &partition{p: p}
	t.Cleanup(func() {
		pt.heal()
		p.Stop()
	})
	return pt
}

func (pt *partition) addr() string { return pt.p.Listen }

// cut drops all data both ways until heal.
func (pt *partition) cut(t *testing.T) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		_, err := pt.p.Toxics.AddToxicJson(strings.NewReader(`{"name":"cut-` + stream + `","type":"timeout","stream":"` + stream + `","attributes":{"timeout":0}}`))
		if err != nil {
			t.Fatalf("cut: %v", err)
		}
	}
}

func (pt *partition) heal() { pt.p.Toxics.ResetToxics(context.Background()) }

// fencedWorkers take turns on key through url into reg until stop: the
// critical sections of TestFaultInstanceKilled, counting those entered
// after cut was set.
type fencedWorkers struct {
	reg   fencedRegister
	after atomic.Int64
	cut   atomic.Bool
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func startWorkers(t *testing.T, ctx context.Context, url, key string, n int, ttl time.Duration) *fencedWorkers {
	t.Helper()
	w := &fencedWorkers{}
	wctx, stop := context.WithCancel(ctx)
	w.stop = stop
	for range n {
		c, err := turnstile.Open(ctx, url, turnstile.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		w.wg.Go(func() {
			for wctx.Err() == nil {
				l, err := c.Acquire(wctx, key, turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 50 * time.Millisecond, MaxRetries: -1}))
				if err != nil {
					continue // a call cut off by the partition: the outcome is unknown, try again
				}
				w.reg.enter(l.Token())
				if w.cut.Load() {
					w.after.Add(1)
				}
				// The section ends when the lease does, if that comes first.
				select {
				case <-time.After(5 * time.Millisecond):
				case <-l.Context().Done():
				}
				w.reg.leave()
				rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = l.Release(rctx)
				rcancel()
			}
		})
	}
	return w
}

// check stops the workers and fails on a fenced violation or on no
// section after the cut.
func (w *fencedWorkers) check(t *testing.T) {
	t.Helper()
	w.stop()
	w.wg.Wait()
	w.reg.mu.Lock()
	defer w.reg.mu.Unlock()
	t.Logf("sections: %d, %d after the partition; fenced: %d refused, %d out of order, %d overlaps",
		w.reg.sections, w.after.Load(), w.reg.refused, w.reg.order, w.reg.overlaps)
	if w.reg.order+w.reg.overlaps > 0 {
		t.Fatalf("fenced violations: %d out of order, %d overlapping (%s)", w.reg.order, w.reg.overlaps, w.reg.violation)
	}
	if w.after.Load() == 0 {
		t.Fatal("no section after the partition: the workers did not go on through the other instance")
	}
}

// TestFaultClientPartition: Go workers take turns on one key through
// turnstile://A,B, and a Go Client holds a lease there, when the network
// between them and instance A drops everything (A and the store stay
// fine). The workers go on through B with no fenced violation; the
// lease is either renewed through B or told it is lost, never believed
// held while another holds the lock.
func TestFaultClientPartition(t *testing.T) {
	srv := testserver.StartRedis(t)
	a := startServe(t, "--backend", srv.URL())
	b := startServe(t, "--backend", srv.URL())
	toA := newPartition(t, "client-a", a.addr)
	// Healed, the clients' streams to A close at once, not at their ping
	// timeout.
	partitionWhileHeld(t, "turnstile://"+toA.addr()+","+b.addr, toA, b.addr)
}

// TestFaultStorePartition: the network between instance A and the store
// drops everything, while Go workers take turns on one key through
// turnstile://A,B. A's calls fail or time out; the workers go on (through
// B, or through A's answers once they come) with no fenced violation, and
// a lease renewed through A is renewed through B or told it is lost.
func TestFaultStorePartition(t *testing.T) {
	srv := testserver.StartRedis(t)
	toStore := newPartition(t, "a-store", srv.Addr())
	a := startServe(t, "--backend", "redis://"+toStore.addr())
	b := startServe(t, "--backend", srv.URL())
	partitionWhileHeld(t, "turnstile://"+a.addr+","+b.addr, toStore, b.addr)
}

// partitionWhileHeld holds a lease and runs fenced workers through url
// (with a TTL of 2 s), cuts pt for five TTLs, checks the workers, heals
// pt and checks the lease through the instance at via.
func partitionWhileHeld(t *testing.T, url string, pt *partition, via string) {
	t.Helper()
	const ttl = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	gc, err := turnstile.Open(ctx, url, turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	lease, err := gc.Acquire(ctx, "partition:go")
	if err != nil {
		t.Fatal(err)
	}
	w := startWorkers(t, ctx, url, "partition:work", 4, ttl)
	time.Sleep(2 * time.Second)
	w.cut.Store(true)
	pt.cut(t)
	time.Sleep(5 * ttl)
	w.check(t)
	pt.heal()
	leaseHeld(t, lease, via)
}

// leaseHeld checks a lease after a partition: if its holder still
// believes in it, the store says it holds the lock; if not, it was told,
// within the TTL of the partition.
func leaseHeld(t *testing.T, lease *turnstile.Lease, via string) {
	t.Helper()
	c := clientsOf(t, via)
	if lease.Context().Err() != nil {
		t.Logf("the Go lease was lost after the partition (told: %v)", context.Cause(lease.Context()))
		return
	}
	if !held(t, c, lease.Key()) {
		t.Fatal("the Go lease believes it holds a lock the store says is free")
	}
	t.Log("the Go lease was renewed through the other instance")
}

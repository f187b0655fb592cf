//go:build !race

// Fault cases with real processes: mostly waiting out TTLs, they run
// without the race detector (scripts/test.sh runs them in its pass of
// such tests).

package service_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/testserver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// fencedRegister is storage that checks tokens: a write whose token is
// not above the last accepted one is refused (the fence at work). Every
// critical section also records its order: a section whose token is not
// above the one entered before it, or that begins before the one before
// it ended, is a violation.
type fencedRegister struct {
	mu        sync.Mutex
	last      uint64 // the last token accepted
	entered   uint64 // the token of the last section entered
	inside    int
	sections  int
	refused   int
	order     int // sections whose token is not above the one before
	overlaps  int
	violation string
}

func (r *fencedRegister) enter(token uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sections++
	r.inside++
	if r.inside > 1 {
		r.overlaps++
	}
	if token <= r.entered {
		r.order++
		if r.violation == "" {
			r.violation = fmt.Sprintf("section %d got token %d after %d", r.sections, token, r.entered)
		}
	}
	r.entered = token
	if token <= r.last {
		r.refused++
		return
	}
	r.last = token
}

func (r *fencedRegister) leave() {
	r.mu.Lock()
	r.inside--
	r.mu.Unlock()
}

// TestFaultInstanceKilled: of two "turnstile serve" instances over one
// redis-server, the one serving everything is SIGKILLed while:
//
//   - a Hold stream holds a lease through it: the holder learns at once
//     (its stream breaks), the lock expires within the TTL, and the next
//     holder's token is larger;
//   - a Go Client holds a lease over turnstile://A,B: its renewals fail
//     over to the other instance and the lease is never lost;
//   - Go workers take turns on one key through turnstile://A,B into a
//     fenced register: they go on through the other instance, with no
//     fenced violation (tokens in the order of the sections, no two
//     sections at once).
func TestFaultInstanceKilled(t *testing.T) {
	srv := testserver.StartRedis(t)
	a := startServe(t, "--backend", srv.URL())
	b := startServe(t, "--backend", srv.URL())
	url := "turnstile://" + a.addr + "," + b.addr
	const ttl = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The Hold stream, on a.
	ha := clientsOf(t, a.addr)
	hctx, stopHold := context.WithCancel(ctx)
	defer stopHold()
	hold, g := holdStream(t, hctx, ha, &v1.HoldRequest{Key: "fault:hold", Ttl: durationpb.New(ttl)})
	noticed := make(chan time.Time, 1)
	go func() {
		for hold.Receive() {
		}
		noticed <- time.Now()
	}()

	// The Go Client's lease, renewed through a (the first instance).
	gc, err := turnstile.Open(ctx, url, turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	lease, err := gc.Acquire(ctx, "fault:go")
	if err != nil {
		t.Fatal(err)
	}

	// The workers.
	reg := &fencedRegister{}
	var after atomic.Int64 // sections entered after the kill
	var killed atomic.Bool
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		c, err := turnstile.Open(ctx, url, turnstile.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			for wctx.Err() == nil {
				l, err := c.Acquire(wctx, "fault:work", turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 50 * time.Millisecond, MaxRetries: -1}))
				if err != nil {
					if wctx.Err() == nil && !killedRecently(&killed) {
						errs <- err
					}
					continue
				}
				reg.enter(l.Token())
				if killed.Load() {
					after.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
				reg.leave()
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = l.Release(rctx)
				rcancel()
			}
		})
	}

	time.Sleep(2 * time.Second)
	before := reg.sectionsNow()
	killedAt := time.Now()
	killed.Store(true)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	select {
	case at := <-noticed:
		if d := at.Sub(killedAt); d > ttl {
			t.Errorf("the holder learned %v after its instance died, more than the TTL %v", d, ttl)
		}
	case <-time.After(ttl):
		t.Errorf("the holder did not learn within the TTL %v that its instance died", ttl)
	}
	cb := clientsOf(t, b.addr)
	var next *v1.AcquireResponse
	if err := proc.Poll(5*ttl, 20*time.Millisecond, func() error {
		r, err := cb.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "fault:hold"}))
		if err != nil {
			return err
		}
		next = r.Msg
		return nil
	}); err != nil {
		t.Fatalf("the dead instance's Hold lock is not free %v later: %v", 5*ttl, err)
	}
	if next.Lease.Token <= g.Lease.Token {
		t.Errorf("the next holder's token %d is not above the dead holder's %d", next.Lease.Token, g.Lease.Token)
	}

	time.Sleep(3 * ttl) // renewals of the Go lease, through b only
	if err := lease.Context().Err(); err != nil {
		t.Errorf("the Go Client's lease was lost when an instance died: %v", context.Cause(lease.Context()))
	}
	st, err := cb.locks.Status(ctx, connect.NewRequest(&v1.StatusRequest{Key: "fault:go"}))
	if err != nil || !st.Msg.State.Held || st.Msg.State.Holders[0].Owner != lease.Owner() {
		t.Errorf("the Go Client's lock: %v, %v; want held by %s", st, err, lease.Owner())
	}
	stopWorkers()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a worker: %v", err)
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	t.Logf("sections: %d before the kill, %d after; fenced: %d refused, %d out of order, %d overlaps",
		before, after.Load(), reg.refused, reg.order, reg.overlaps)
	if reg.order+reg.overlaps > 0 {
		t.Fatalf("fenced violations: %d out of order, %d overlapping (%s)", reg.order, reg.overlaps, reg.violation)
	}
	if after.Load() == 0 {
		t.Fatal("no section after the instance died: the workers did not fail over")
	}
}

func (r *fencedRegister) sectionsNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sections
}

// killedRecently: an acquisition that fails right after the kill (its
// call was in flight on the dead instance) is the driver's unknown
// outcome, which the worker retries.
func killedRecently(k *atomic.Bool) bool { return k.Load() }

// TestFaultHoldClientKilled: a process holding a lock through a Hold
// stream is SIGKILLed; its kernel closes the connection, and the
// instance releases the lock at once, long before its TTL.
func TestFaultHoldClientKilled(t *testing.T) {
	srv := testserver.StartRedis(t)
	p := startServe(t, "--backend", srv.URL())
	const ttl = time.Minute
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHoldChild+"="+p.addr+" fault:client")
	proc.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HELD ") {
		t.Fatalf("the child said %q, %v\n%s", line, err, stderr.String())
	}
	token, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "HELD ")), 10, 64)
	c := clientsOf(t, p.addr)
	if !held(t, c, "fault:client") {
		t.Fatal("not held while the child holds it")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed := time.Now()
	for held(t, c, "fault:client") {
		if time.Since(killed) > ttl/2 {
			t.Fatalf("still held %v after the holder died", time.Since(killed))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("free %v after the holder was killed (TTL %v)", time.Since(killed), ttl)
	r, err := c.locks.TryAcquire(ctxFor(t, 10*time.Second), connect.NewRequest(&v1.AcquireRequest{Key: "fault:client"}))
	if err != nil || r.Msg.Lease.Token <= token {
		t.Fatalf("next holder: %v, %v; want a token above %d", r, err, token)
	}
}

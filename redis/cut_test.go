package redis

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// deadlines is a net.Conn that records the deadlines set on it.
type deadlines struct {
	net.Conn
	mu  sync.Mutex
	set []time.Time
}

func (d *deadlines) SetDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.set = append(d.set, t)
	return nil
}

func (d *deadlines) last() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.set) == 0 {
		return time.Time{}
	}
	return d.set[len(d.set)-1]
}

// newCut returns a cutter and a connection of it that records deadlines.
func newCut(t *testing.T) (*cutter, *cutConn, *deadlines) {
	t.Helper()
	opt := rueidis.ClientOption{}
	k := newCutter(&opt)
	d := &deadlines{}
	return k, &cutConn{Conn: d, k: k}, d
}

// TestCutOnlyItsOwnRoundTrip: a call whose context ends cuts the
// connection that carries its round trip — at once, or when rueidis
// sets the call's deadline on it if the context ended before — and
// never a connection that went on to another command's deadline, to no
// deadline (the background mode), or after the call ended.
func TestCutOnlyItsOwnRoundTrip(t *testing.T) {
	wantCut := func(t *testing.T, d *deadlines, cut bool) {
		t.Helper()
		if got := d.last().Equal(past); got != cut {
			t.Fatalf("connection cut: %v, want %v (deadlines %v)", got, cut, d.set)
		}
	}
	t.Run("in flight", func(t *testing.T) {
		k, c, d := newCut(t)
		ctx, cancel := context.WithCancel(context.Background())
		lctx, lc := k.lone(ctx)
		dl, ok := lctx.Deadline()
		if !ok || time.Until(dl) > k.longest {
			t.Fatalf("deadline %v, %v: want one within %v", dl, ok, k.longest)
		}
		_ = c.SetDeadline(dl)
		wantCut(t, d, false)
		cancel()
		waitFor(t, func() bool { return d.last().Equal(past) })
		k.done(lc)
	})
	t.Run("ended before the deadline was set", func(t *testing.T) {
		k, c, d := newCut(t)
		ctx, cancel := context.WithCancel(context.Background())
		lctx, lc := k.lone(ctx)
		cancel()
		waitFor(t, func() bool {
			lc.sh.mu.Lock()
			defer lc.sh.mu.Unlock()
			return lc.ended
		})
		dl, _ := lctx.Deadline()
		_ = c.SetDeadline(dl)
		wantCut(t, d, true)
		k.done(lc)
	})
	for _, next := range []string{"another deadline", "no deadline"} {
		t.Run("connection moved on to "+next, func(t *testing.T) {
			k, c, d := newCut(t)
			ctx, cancel := context.WithCancel(context.Background())
			lctx, lc := k.lone(ctx)
			dl, _ := lctx.Deadline()
			_ = c.SetDeadline(dl)
			if next == "no deadline" {
				_ = c.SetDeadline(time.Time{})
			} else {
				_ = c.SetDeadline(time.Now().Add(time.Second))
			}
			lc.cutNow() // as the context's end would, before end()
			wantCut(t, d, false)
			cancel()
			k.done(lc)
		})
	}
	t.Run("after the call ended", func(t *testing.T) {
		k, c, d := newCut(t)
		ctx, cancel := context.WithCancel(context.Background())
		lctx, lc := k.lone(ctx)
		dl, _ := lctx.Deadline()
		_ = c.SetDeadline(dl)
		k.done(lc)
		cancel()
		time.Sleep(10 * time.Millisecond) // an AfterFunc, if left, has run
		wantCut(t, d, false)
		if n := len(lc.sh.calls); n != 0 {
			t.Errorf("%d calls left in the shard", n)
		}
	})
	t.Run("distinct deadlines", func(t *testing.T) {
		k, _, _ := newCut(t)
		dl := time.Now().Add(time.Minute)
		ctx, cancel := context.WithDeadline(context.Background(), dl)
		defer cancel()
		seen := map[int64]bool{}
		for range 1000 {
			lctx, lc := k.lone(ctx)
			at, _ := lctx.Deadline()
			if lc == nil || !at.Before(dl) || seen[at.UnixNano()] {
				t.Fatalf("deadline %v (call %v): not watched, not before the context's %v, or handed out twice", at, lc, dl)
			}
			seen[at.UnixNano()] = true
			k.done(lc)
		}
	})
	t.Run("overlapping calls", func(t *testing.T) {
		k, _, _ := newCut(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, first := k.lone(ctx)
		second, lc := k.lone(ctx)
		if first == nil || lc != nil || second != ctx {
			t.Fatalf("first call watched: %v; the overlapping one: %v, its context %v (want the caller's)", first != nil, lc != nil, second)
		}
		k.done(lc)
		k.done(first)
		if _, third := k.lone(ctx); third == nil {
			t.Error("a call after the overlap ended is not watched")
		} else {
			k.done(third)
		}
		if n := k.inflight.Load(); n != 0 {
			t.Errorf("%d calls counted in flight after all ended", n)
		}
	})
	t.Run("a context that never ends", func(t *testing.T) {
		k, _, _ := newCut(t)
		ctx, lc := k.lone(context.Background())
		if _, ok := ctx.Deadline(); ok || lc != nil {
			t.Fatal("a context that never ends got a deadline or a call")
		}
		k.done(lc) // nil: nothing
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not met within 5 s")
		}
	}
}

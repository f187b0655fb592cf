package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/events"
	consumer "github.com/turnstilelock/turnstile/events/consume"
	"github.com/turnstilelock/turnstile/memory"
)

// TestFromLockForceReleased: an operator's forced release becomes a
// FORCE_RELEASED event naming the removed holder, which Validate accepts.
func TestFromLockForceReleased(t *testing.T) {
	ev, ok := events.FromLock(turnstile.Event{
		Type: turnstile.EventForceReleased, Time: time.Now(), Backend: "redis 127.0.0.1:6379",
		Key: "lock:report", Owner: "host-1/ABC", Token: 42,
	})
	if !ok {
		t.Fatal("FromLock does not convert EventForceReleased")
	}
	if ev.Type != events.TypeForceReleased || ev.Key != "lock:report" || ev.Owner != "host-1/ABC" || ev.Token != 42 {
		t.Errorf("FromLock = %+v", ev)
	}
	if events.TypeForceReleased != "FORCE_RELEASED" {
		t.Errorf("TypeForceReleased = %q", events.TypeForceReleased)
	}
	if err := ev.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// roomy is a memory store whose tokens leave room for handoffs within a
// Client (driver.TokenRoom): each memory token times the room. Its forced
// release reports the floor above every token a run of handoffs from the
// removed holder's could carry.
type roomy struct{ *memory.Backend }

const room = 16

func (roomy) TokenRoom() uint64 { return room }

func (r roomy) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	tok, ok, err := r.Backend.Acquire(ctx, key, owner, ttl)
	return tok * room, ok, err
}

func (r roomy) ForceRelease(ctx context.Context, key string) (driver.LockState, error) {
	st, err := r.Backend.ForceRelease(ctx, key)
	for i := range st.Holders {
		st.Holders[i].Token *= room
	}
	st.Token = st.Token*room + room - 1
	return st, err
}

// TestForceReleasedAfterHandedLease: a Client hands a lock to its own
// waiter without the store (token T+1 after the store's T), then an
// operator removes it by force. The FORCE_RELEASED event orders after the
// removed lease's ACQUIRED, whose token the store never saw, so a
// consumer applies it rather than dropping it as stale; and the next
// lease's ACQUIRED orders after it.
func TestForceReleasedAfterHandedLease(t *testing.T) {
	var (
		mu      sync.Mutex
		evs     []events.Event
		waiting = make(chan struct{}, 16)
	)
	obs := turnstile.ObserverFunc(func(e turnstile.Event) {
		if e.Type == turnstile.EventWaiting {
			waiting <- struct{}{}
		}
		if ev, ok := events.FromLock(e); ok {
			mu.Lock()
			evs = append(evs, ev)
			mu.Unlock()
		}
	})
	c, err := turnstile.New(roomy{memory.New()}, turnstile.WithTTL(20*time.Second), turnstile.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxFor(t, time.Minute)
	const key = "report"

	// Release to a waiting lease until one is handed over without the
	// store: the waiter takes such a handoff once it waits on its
	// signals, right after it reports that it waits.
	cur, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; cur.Token()%room == 0; attempt++ {
		if attempt == 50 {
			t.Fatal("no lease handed over without the store")
		}
		got := make(chan *turnstile.Lease, 1)
		go func() {
			l, err := c.Acquire(ctx, key)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		<-waiting
		time.Sleep(20 * time.Millisecond)
		if err := cur.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if cur = <-got; cur == nil {
			t.FailNow()
		}
	}
	if _, err := c.ForceRelease(ctx, key); err != nil {
		t.Fatal(err)
	}
	next, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = next.Release(ctx) }()

	mu.Lock()
	defer mu.Unlock()
	var handed, forced, after *events.Event
	for i := range evs {
		switch ev := &evs[i]; {
		case ev.Type == events.TypeAcquired && ev.Token == cur.Token():
			handed = ev
		case ev.Type == events.TypeForceReleased:
			forced = ev
		case ev.Type == events.TypeAcquired && ev.Token == next.Token():
			after = ev
		}
	}
	if handed == nil || forced == nil || after == nil {
		t.Fatalf("events %+v: want the handed lease's ACQUIRED, FORCE_RELEASED and the next ACQUIRED", evs)
	}
	if forced.Owner != cur.Owner() {
		t.Errorf("FORCE_RELEASED names %q, want the removed owner %q", forced.Owner, cur.Owner())
	}
	if p, q := consumer.PositionOf(*handed), consumer.PositionOf(*forced); !p.Before(q) {
		t.Errorf("FORCE_RELEASED (token %d) does not order after the removed lease's ACQUIRED (token %d): a consumer drops it as stale", forced.Token, handed.Token)
	}
	if p, q := consumer.PositionOf(*forced), consumer.PositionOf(*after); !p.Before(q) {
		t.Errorf("the next lease's ACQUIRED (token %d) does not order after FORCE_RELEASED (token %d)", after.Token, forced.Token)
	}
}

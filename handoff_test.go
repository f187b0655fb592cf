package turnstile_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

// roomy is a memory backend whose tokens leave room between grants
// (driver.TokenRoom): each memory token times the room.
type roomy struct {
	*memory.Backend
	acquires atomic.Int64
}

const room = 16

func newRoomy() *roomy { return &roomy{Backend: memory.New()} }

func (r *roomy) TokenRoom() uint64 { return room }

func (r *roomy) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	r.acquires.Add(1)
	tok, ok, err := r.Backend.Acquire(ctx, key, owner, ttl)
	return tok * room, ok, err
}

// waitingSignal is an option that reports each EventWaiting on a channel.
func waitingSignal() (turnstile.Option, <-chan struct{}) {
	ch := make(chan struct{}, 64)
	return turnstile.WithObserver(turnstile.ObserverFunc(func(e turnstile.Event) {
		if e.Type == turnstile.EventWaiting {
			ch <- struct{}{}
		}
	})), ch
}

// TestHandOffWithoutTheStore: the waiters of one Client take a hot key
// from each other's releases without the store while the tokens leave
// room, with tokens strictly increasing in the order of the critical
// sections; waiters that give up on the way leave nothing held.
func TestHandOffWithoutTheStore(t *testing.T) {
	b := newRoomy()
	c := newClient(t, b, turnstile.WithTTL(8*time.Second))
	const workers, rounds, key = 8, 200, "hot"
	ctx := context.Background()
	var (
		mu      sync.Mutex // taken only inside the critical section
		order   []uint64
		wg      sync.WaitGroup
		gaveUp  atomic.Int64
		failure atomic.Value
	)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				actx, cancel := ctx, context.CancelFunc(func() {})
				if w == 0 && i%4 == 0 {
					// Gives up soon: a handoff may be on its way.
					actx, cancel = context.WithTimeout(ctx, time.Duration(i%7)*50*time.Microsecond)
				}
				l, err := c.Acquire(actx, key)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					gaveUp.Add(1)
					continue
				}
				if err != nil {
					failure.Store(err)
					return
				}
				mu.Lock()
				order = append(order, l.Token())
				mu.Unlock()
				// Let the others line up: without a pause a worker may
				// run its rounds before the scheduler runs any other.
				runtime.Gosched()
				if err := l.Release(ctx); err != nil {
					failure.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failure.Load().(error); err != nil {
		t.Fatal(err)
	}
	local := 0
	for i, tok := range order {
		if i > 0 && tok <= order[i-1] {
			t.Fatalf("section %d got token %d after section %d's %d", i, tok, i-1, order[i-1])
		}
		if tok%room != 0 {
			local++
		}
	}
	n := len(order)
	acquires := int(b.acquires.Load())
	t.Logf("%d acquisitions (%d gave up): %d without the store, %d store attempts", n, gaveUp.Load(), local, acquires)
	if local == 0 || acquires > n/2 {
		t.Fatalf("%d of %d acquisitions without the store, %d store attempts: want most without it", local, n, acquires)
	}
	if _, _, _, held := b.Holder(key); held {
		t.Fatal("the key is still held after every lease was released")
	}
}

// TestHandOffWithoutTheStoreOnlyFresh: a lease whose TTL is a quarter
// gone, or a waiter that asked for another TTL, goes through the store:
// the handed lease would otherwise start with less than the waiter asked
// for.
func TestHandOffWithoutTheStoreOnlyFresh(t *testing.T) {
	cases := []struct {
		name      string
		hold      time.Duration
		waiterTTL time.Duration
		local     bool
	}{
		{"fresh", 0, 8 * time.Second, true},
		{"quarter gone", 2100 * time.Millisecond, 8 * time.Second, false},
		{"other ttl", 0, 9 * time.Second, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newRoomy()
			waiting, signal := waitingSignal()
			c, err := turnstile.New(b, turnstile.WithTTL(8*time.Second), turnstile.WithoutWatchdog(), waiting,
				turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: -1}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			first, err := c.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			next := make(chan *turnstile.Lease, 1)
			go func() {
				l, err := c.Acquire(ctx, "k", turnstile.WithTTL(tc.waiterTTL))
				if err != nil {
					t.Error(err)
				}
				next <- l
			}()
			<-signal
			// The head is ready for a handoff once it waits on its
			// signals; a release before that goes through the store,
			// which the cases must not mistake for the rule.
			for i := 0; i < 1000 && !turnstile.HeadReady(c, "k"); i++ {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(tc.hold)
			left := first.Validity()
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			second := <-next
			if second == nil {
				return
			}
			defer second.Release(ctx)
			if local := second.Token() == first.Token()+1; local != tc.local {
				t.Fatalf("tokens %d then %d: handed over without the store = %v, want %v", first.Token(), second.Token(), local, tc.local)
			}
			if tc.local && (second.Owner() != first.Owner() || second.Validity() > left) {
				t.Fatalf("handed over without the store: owner %s validity %v, after owner %s with %v left", second.Owner(), second.Validity(), first.Owner(), left)
			}
			if !tc.local && second.Owner() == first.Owner() {
				t.Fatalf("through the store under the same owner id %s", first.Owner())
			}
		})
	}
}

// TestElectionNotHandedWithoutTheStore: a leader's resignation never
// hands the election's lock to a campaign of the same Client without the
// store: the next leader is known by an owner id of its own, carrying its
// own value.
func TestElectionNotHandedWithoutTheStore(t *testing.T) {
	b := newRoomy()
	c := newClient(t, b, turnstile.WithTTL(8*time.Second))
	e := mustElection(t, c, "lead")
	ctx := context.Background()
	first := mustCampaign(t, ctx, e, "one")
	next := make(chan *turnstile.Leadership, 1)
	go func() {
		l, err := e.Campaign(ctx, "one")
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	for i := 0; i < 1000 && !turnstile.HeadReady(c, "lead"); i++ {
		time.Sleep(time.Millisecond)
	}
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-next
	if second == nil {
		return
	}
	defer second.Resign(ctx)
	if second.Lease().Owner() == first.Lease().Owner() || second.Term()%room != 0 {
		t.Fatalf("leader %s (term %d) after %s (term %d): handed over without the store", second.Lease().Owner(), second.Term(), first.Lease().Owner(), first.Term())
	}
}

// aloudRoomy is a roomy backend that counts its releases with the notice
// in any case (driver.NoticeReleaser).
type aloudRoomy struct {
	*roomy
	aloud, plain atomic.Int64
}

func (a *aloudRoomy) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (bool, bool, error) {
	if n != driver.NoticeAlways {
		return false, false, errors.New("an election's resignation released without its notice")
	}
	a.aloud.Add(1)
	ok, err := a.roomy.Release(ctx, key, owner)
	return ok, false, err
}

func (a *aloudRoomy) Release(ctx context.Context, key, owner string) (bool, error) {
	a.plain.Add(1)
	return a.roomy.Release(ctx, key, owner)
}

// TestElectionResignsAloudInALine: every resignation sends its notice,
// also when the next campaigner waits in the same Client's line.
func TestElectionResignsAloudInALine(t *testing.T) {
	b := &aloudRoomy{roomy: newRoomy()}
	c := newClient(t, b, turnstile.WithTTL(8*time.Second))
	e := mustElection(t, c, "lead", turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 5 * time.Millisecond, MaxRetries: -1}))
	ctx := context.Background()
	// Four campaigners take turns and hold a moment, so that the line is
	// rarely empty and its runs of releases reach 16.
	const campaigners, rounds = 4, 20
	var wg sync.WaitGroup
	for i := range campaigners {
		wg.Go(func() {
			for range rounds {
				l, err := e.Campaign(ctx, string(rune('a'+i)))
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond) // the others line up meanwhile
				if err := l.Resign(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.plain.Load() != 0 || b.aloud.Load() != campaigners*rounds {
		t.Fatalf("%d resignations: %d sent their notice, %d only if someone else tried", campaigners*rounds, b.aloud.Load(), b.plain.Load())
	}
}

package fallback_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fallback"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/memory"
)

// TestKinds runs the conformance cases of the reentrant, semaphore and
// read-write views of fallback(redis, memory) with a healthy primary.
func TestKinds(t *testing.T) {
	srv := testserver.StartRedis(t)
	pair := func(t testing.TB) *fallback.Backend {
		b, err := fallback.New(dialRedis(t, srv), memory.New(), fallback.WithGrace(2*time.Minute))
		if err != nil {
			t.Fatalf("fallback.New: %v", err)
		}
		return b
	}
	t.Run("Reentrant", func(t *testing.T) {
		locktest.RunReentrant(t, locktest.Harness{New: func(t testing.TB) driver.Backend {
			v, err := turnstile.Reentrant(pair(t))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}})
	})
	t.Run("Semaphore", func(t *testing.T) {
		locktest.RunSemaphore(t, locktest.Harness{
			New: func(t testing.TB) driver.Backend {
				v, err := turnstile.Semaphore(pair(t), 3)
				if err != nil {
					t.Fatal(err)
				}
				return v
			},
			Plain: func(t testing.TB) driver.Backend { return pair(t) },
		}, 3)
	})
	t.Run("ReadWrite", func(t *testing.T) {
		b := pair(t)
		read, write, err := turnstile.ReadWrite(b)
		if err != nil {
			t.Fatal(err)
		}
		locktest.RunReadWrite(t, func(testing.TB) (driver.Backend, driver.Backend) { return read, write })
	})
}

// kindsStore is a memory store whose semaphores fail every call while
// down is set, as a dead server's would.
type kindsStore struct {
	*memory.Backend
	down atomic.Bool
}

func (k *kindsStore) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	s, err := k.Backend.SemaphoreView(cfg)
	if err != nil {
		return nil, err
	}
	return &downView{Backend: s, down: &k.down}, nil
}

type downView struct {
	driver.Backend
	down *atomic.Bool
}

func (d *downView) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	if d.down.Load() {
		return 0, false, errDown
	}
	return d.Backend.Acquire(ctx, key, owner, ttl)
}

func (d *downView) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if d.down.Load() {
		return false, errDown
	}
	return d.Backend.Extend(ctx, key, owner, ttl)
}

// TestSemaphoreSwitch: a semaphore's failures trip the pair's one
// breaker, the plain lock and the semaphore switch together, the
// secondary grants no permit during the grace, and permits of the
// primary cannot be renewed: when the secondary grants one, the
// primary's have all expired.
func TestSemaphoreSwitch(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	prim := &kindsStore{Backend: memory.New()}
	b, err := fallback.New(prim, memory.New(), fallback.WithTripAfter(unitTripAft), fallback.WithOpenTimeout(time.Minute), fallback.WithGrace(unitGrace))
	if err != nil {
		t.Fatal(err)
	}
	sem, err := turnstile.Semaphore(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := sem.(driver.Shared); !ok || !s.Shared() {
		t.Fatalf("semaphore view %T is not driver.Shared", sem)
	}
	for _, o := range []string{"a", "b"} {
		if _, ok, err := sem.Acquire(ctx, "k", o, unitTTL); !ok || err != nil {
			t.Fatalf("permit %s in the primary: %v %v", o, ok, err)
		}
	}
	prim.down.Store(true)
	for i := range unitTripAft {
		// The failure that opens the breaker starts the switch: that
		// call answers "not acquired".
		_, ok, err := sem.Acquire(ctx, "k", "c", unitTTL)
		if ok || (err == nil) != (i == unitTripAft-1) {
			t.Fatalf("acquisition %d on a primary that is down: %v %v", i, ok, err)
		}
	}
	if b.State() != fallback.StateOpen {
		t.Fatalf("breaker %v after %d failures of the semaphore, want open", b.State(), unitTripAft)
	}
	if name, inGrace := b.Serving(); !inGrace || !strings.Contains(name, "memory") {
		t.Fatalf("serving %q (grace %v), want the secondary in its grace", name, inGrace)
	}
	switched := time.Now()
	if _, ok, err := sem.Acquire(ctx, "k", "c", unitTTL); ok || err != nil {
		t.Fatalf("permit during the grace: %v %v, want not acquired", ok, err)
	}
	if _, ok, err := b.Acquire(ctx, "plain", "c", unitTTL); ok || err != nil {
		t.Fatalf("plain lock during the grace: %v %v, want not acquired: the switch is shared", ok, err)
	}
	prim.down.Store(false)
	if ok, err := sem.Extend(ctx, "k", "a", unitTTL); ok || err != nil {
		t.Fatalf("renewal of a primary permit after the switch: %v %v, want refused", ok, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, ok, err := sem.Acquire(ctx, "k", "c", unitTTL)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the secondary never granted a permit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if since := time.Since(switched); since < unitGrace/2 {
		t.Fatalf("the secondary granted a permit %v after the switch, within the grace %v", since, unitGrace)
	}
	ps := locktest.View[*memory.Semaphore](t)(turnstile.Semaphore(prim.Backend, 2))
	if st, err := ps.Inspect(ctx, "k"); err != nil || st.Held {
		t.Fatalf("the primary's permits are still held when the secondary grants one: %+v %v", st, err)
	}
}

// TestKindsRefused: the fair lock is refused with the reason, and a kind
// one store lacks names that store.
func TestKindsRefused(t *testing.T) {
	b, err := fallback.New(memory.New(), memory.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turnstile.Fair(b); !errors.Is(err, turnstile.ErrUnsupported) || !errors.Is(err, fallback.ErrFair) || !strings.Contains(err.Error(), "queue") {
		t.Fatalf("Fair = %v, want ErrFair (ErrUnsupported) with the reason", err)
	}
	plain, err := fallback.New(memory.New(), plainOnly{memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"reentrant": func() error { _, err := turnstile.Reentrant(plain); return err }(),
		"semaphore": func() error { _, err := turnstile.Semaphore(plain, 2); return err }(),
		"readwrite": func() error { _, _, err := turnstile.ReadWrite(plain); return err }(),
	} {
		if !errors.Is(err, turnstile.ErrUnsupported) || !strings.Contains(err.Error(), "secondary") {
			t.Errorf("%s with a secondary that has none = %v, want ErrUnsupported naming the secondary", name, err)
		}
	}
	if _, err := turnstile.Semaphore(b, 0); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("Semaphore(0) = %v, want ErrInvalidOption", err)
	}
}

// plainOnly is a store with the plain lock alone.
type plainOnly struct{ driver.Backend }

// TestKindsSettings: both stores' views are made with the pair's view's
// settings.
func TestKindsSettings(t *testing.T) {
	p, s := &askedStore{Backend: memory.New()}, &askedStore{Backend: memory.New()}
	b, err := fallback.New(p, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := turnstile.ReadWrite(b, turnstile.WithWriterClaim(750*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := turnstile.Semaphore(b, 4); err != nil {
		t.Fatal(err)
	}
	want := []driver.KindConfig{{WriterClaim: 750 * time.Millisecond}, {Permits: 4}}
	for name, st := range map[string]*askedStore{"primary": p, "secondary": s} {
		if !slices.Equal(st.asked, want) {
			t.Errorf("the %s's views were made with %+v, want %+v", name, st.asked, want)
		}
	}
}

// askedStore is a store that keeps the settings of its views.
type askedStore struct {
	*memory.Backend
	asked []driver.KindConfig
}

func (s *askedStore) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	s.asked = append(s.asked, cfg)
	return s.Backend.ReadWriteView(cfg)
}

func (s *askedStore) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	s.asked = append(s.asked, cfg)
	return s.Backend.SemaphoreView(cfg)
}

// TestOtherPermitsDoNotTrip: a semaphore refused for its number of
// permits is the caller's mistake, not the primary's failure: the
// breaker stays closed however often it happens.
func TestOtherPermitsDoNotTrip(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	b, err := fallback.New(memory.New(), memory.New(), fallback.WithTripAfter(unitTripAft), fallback.WithGrace(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	two, _ := turnstile.Semaphore(b, 2)
	three, _ := turnstile.Semaphore(b, 3)
	if _, ok, err := two.Acquire(ctx, "k", "a", time.Second); !ok || err != nil {
		t.Fatalf("permit: %v %v", ok, err)
	}
	for range 2 * unitTripAft {
		if _, _, err := three.Acquire(ctx, "k", "b", time.Second); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Fatalf("a view with 3 while 2 hold: %v, want ErrInvalidOption", err)
		}
	}
	if b.State() != fallback.StateClosed {
		t.Fatalf("breaker %v after refusals of the number of permits, want closed", b.State())
	}
}

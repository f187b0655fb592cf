package turnstile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

// semaphoreStore offers a semaphore and nothing else.
type semaphoreStore struct {
	driver.Backend
	asked int
}

func (s *semaphoreStore) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	s.asked = cfg.Permits
	return plain{s.Backend}, nil
}

// kindStore offers every kind and keeps the settings it was asked with.
type kindStore struct {
	driver.Backend
	asked []driver.KindConfig
}

func (s *kindStore) ReentrantView(cfg driver.KindConfig) (driver.Backend, error) {
	s.asked = append(s.asked, cfg)
	return s.Backend, nil
}

func (s *kindStore) SemaphoreView(cfg driver.KindConfig) (driver.Backend, error) {
	s.asked = append(s.asked, cfg)
	return s.Backend, nil
}

func (s *kindStore) ReadWriteView(cfg driver.KindConfig) (read, write driver.Backend, err error) {
	s.asked = append(s.asked, cfg)
	return s.Backend, s.Backend, nil
}

func (s *kindStore) FairView(cfg driver.KindConfig) (driver.Backend, error) {
	s.asked = append(s.asked, cfg)
	return s.Backend, nil
}

// queueStore queues waiters itself.
type queueStore struct{ driver.Backend }

func (queueStore) AcquireWait(context.Context, string, string, time.Duration) (uint64, error) {
	return 0, errors.New("not called")
}

// TestKinds: the kind functions give the backend's view where it has
// one, the backend itself as the fair view of a store that queues, and
// ErrUnsupported naming the backend otherwise.
func TestKinds(t *testing.T) {
	s := &semaphoreStore{Backend: memory.New()}
	if v, err := turnstile.Semaphore(s, 3); err != nil || v == nil || s.asked != 3 {
		t.Fatalf("Semaphore = %v, %v (asked %d); want the store's view for 3 permits", v, err, s.asked)
	}
	q := queueStore{memory.New()}
	if v, err := turnstile.Fair(q); err != nil || v != driver.Backend(q) {
		t.Fatalf("Fair of a queueing store = %v, %v; want the store itself", v, err)
	}
	mem := memory.New()
	for name, call := range map[string]func(b driver.Backend) error{
		"Reentrant": func(b driver.Backend) error { _, err := turnstile.Reentrant(b); return err },
		"ReadWrite": func(b driver.Backend) error { _, _, err := turnstile.ReadWrite(b); return err },
		"Fair":      func(b driver.Backend) error { _, err := turnstile.Fair(b); return err },
		"Semaphore": func(b driver.Backend) error { _, err := turnstile.Semaphore(b, 2); return err },
	} {
		b := driver.Backend(s)
		if name == "Semaphore" {
			b = plain{mem} // memory offers every kind; plain hides them
		}
		err := call(b)
		if !errors.Is(err, turnstile.ErrUnsupported) || !strings.Contains(err.Error(), driver.Name(b)) {
			t.Errorf("%s of a store without it = %v; want ErrUnsupported naming %s", name, err, driver.Name(b))
		}
	}
	if _, err := turnstile.Reentrant(nil); !errors.Is(err, turnstile.ErrNilBackend) {
		t.Errorf("Reentrant(nil) = %v, want ErrNilBackend", err)
	}
}

// TestKindOptions: each kind's function hands its options to the store's
// view as one KindConfig, checked once for every store: a setting out of
// its range, a nil option and another kind's option are refused with
// ErrInvalidOption before the store is asked; zero is the default.
func TestKindOptions(t *testing.T) {
	s := &kindStore{Backend: memory.New()}
	if _, _, err := turnstile.ReadWrite(s, turnstile.WithWriterClaim(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := turnstile.Fair(s, turnstile.WithWaiterTimeout(time.Second), turnstile.WithPollInterval(20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := turnstile.Semaphore(s, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := turnstile.Reentrant(s); err != nil {
		t.Fatal(err)
	}
	want := []driver.KindConfig{
		{WriterClaim: 500 * time.Millisecond},
		{WaiterTimeout: time.Second, PollInterval: 20 * time.Millisecond},
		{Permits: 7},
		{},
	}
	if len(s.asked) != len(want) {
		t.Fatalf("the store was asked %d times, want %d: %+v", len(s.asked), len(want), s.asked)
	}
	for i, w := range want {
		if s.asked[i] != w {
			t.Errorf("view %d was asked with %+v, want %+v", i, s.asked[i], w)
		}
	}
	if (driver.KindConfig{}).Claim() != driver.DefaultWriterClaim {
		t.Errorf("the default writer claim is %v, want %v", (driver.KindConfig{}).Claim(), driver.DefaultWriterClaim)
	}

	s.asked = nil
	bad := map[string]func() error{
		"0 permits":        func() error { _, err := turnstile.Semaphore(s, 0); return err },
		"-1 permits":       func() error { _, err := turnstile.Semaphore(s, -1); return err },
		"too many permits": func() error { _, err := turnstile.Semaphore(s, driver.MaxPermits+1); return err },
		"short claim": func() error {
			_, _, err := turnstile.ReadWrite(s, turnstile.WithWriterClaim(time.Millisecond))
			return err
		},
		"long claim":           func() error { _, _, err := turnstile.ReadWrite(s, turnstile.WithWriterClaim(2*time.Hour)); return err },
		"negative claim":       func() error { _, _, err := turnstile.ReadWrite(s, turnstile.WithWriterClaim(-time.Second)); return err },
		"short waiter timeout": func() error { _, err := turnstile.Fair(s, turnstile.WithWaiterTimeout(time.Millisecond)); return err },
		"long waiter timeout":  func() error { _, err := turnstile.Fair(s, turnstile.WithWaiterTimeout(2*time.Hour)); return err },
		"negative poll":        func() error { _, err := turnstile.Fair(s, turnstile.WithPollInterval(-time.Millisecond)); return err },
		"long poll":            func() error { _, err := turnstile.Fair(s, turnstile.WithPollInterval(time.Hour)); return err },
		"nil option":           func() error { _, err := turnstile.Reentrant(s, nil); return err },
		"claim of a semaphore": func() error { _, err := turnstile.Semaphore(s, 2, turnstile.WithWriterClaim(time.Second)); return err },
		"poll of a read-write": func() error { _, _, err := turnstile.ReadWrite(s, turnstile.WithPollInterval(time.Second)); return err },
		"timeout of reentrant": func() error { _, err := turnstile.Reentrant(s, turnstile.WithWaiterTimeout(time.Second)); return err },
		"claim of a fair lock": func() error { _, err := turnstile.Fair(s, turnstile.WithWriterClaim(time.Second)); return err },
	}
	for name, call := range bad {
		if err := call(); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if len(s.asked) != 0 {
		t.Errorf("the store was asked for views with refused settings: %+v", s.asked)
	}
	if _, err := turnstile.Semaphore(s, 2, turnstile.WithWriterClaim(time.Second)); err == nil || !strings.Contains(err.Error(), "WithWriterClaim") {
		t.Errorf("another kind's option: %v, want an error naming it", err)
	}
}

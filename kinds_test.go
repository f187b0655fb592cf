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

func (s *semaphoreStore) SemaphoreView(permits int) (driver.Backend, error) {
	s.asked = permits
	return plain{s.Backend}, nil
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

package service_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
)

// kindViews returns the views of a turnstile:// backend by name.
func kindViews(t *testing.T, b driver.Backend) map[string]driver.Backend {
	t.Helper()
	r, w, err := b.(driver.ReadWriter).ReadWriteView(driver.KindConfig{})
	if err != nil {
		t.Fatal(err)
	}
	re, err := b.(driver.Reentranter).ReentrantView(driver.KindConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.(driver.Semaphorer).SemaphoreView(driver.KindConfig{Permits: 3})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]driver.Backend{"plain": b, "read": r, "write": w, "reentrant": re, "semaphore": s}
}

// TestQueuedKinds: each lock kind whose waiters the store queues itself
// is a driver.Queuer through turnstile://, so that a Client waits in the
// store's queue through the service instead of retrying: etcd's writer
// behind a stream of readers only gets in from its queue. A kind the
// store does not queue is not one.
func TestQueuedKinds(t *testing.T) {
	srv := testserver.StartEtcd(t)
	store, err := etcd.Dial(ctxFor(t, 30*time.Second), clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	in := startInstance(t, service.Config{Backend: store})
	for name, v := range kindViews(t, dial(t, "turnstile://"+in.addr)) {
		if _, ok := v.(driver.Queuer); !ok {
			t.Errorf("etcd's %s lock through the service: %T is no driver.Queuer", name, v)
		}
	}

	mem := startInstance(t, service.Config{Backend: memory.New()})
	b := dial(t, "turnstile://"+mem.addr)
	for name, v := range kindViews(t, b) {
		if _, ok := v.(driver.Queuer); ok {
			t.Errorf("memory's %s lock through the service: %T is a driver.Queuer, but the store keeps no queue", name, v)
		}
	}
	f, err := b.(driver.Fairer).FairView(driver.KindConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(driver.Queuer); !ok {
		t.Errorf("memory's fair lock through the service: %T is no driver.Queuer", f)
	}
}

// TestQueuedWaitEndsWithItsContext: a wait in the store's queue through
// the service ends with its context's own end, though the call's
// deadline reaches the instance in whole milliseconds, rounded down, so
// that the instance's copy ends up to one before the caller's does.
// Deadlines a fraction of a millisecond past a whole one make the
// instance answer DEADLINE_EXCEEDED first; the wait still reports its
// context's cause (here: what a Client's wait budget sets), never the
// instance's deadline.
func TestQueuedWaitEndsWithItsContext(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	fv, err := dial(t, "turnstile://"+in.addr).(driver.Fairer).FairView(driver.KindConfig{})
	if err != nil {
		t.Fatal(err)
	}
	q := fv.(driver.Queuer)
	ctx := ctxFor(t, time.Minute)
	if _, ok, err := fv.Acquire(ctx, "held", "holder", time.Minute); !ok || err != nil {
		t.Fatalf("holder: ok=%v err=%v", ok, err)
	}
	budget := errors.New("the wait's budget is used up")
	for i := range 20 {
		d := 20*time.Millisecond + time.Duration(500+25*i)*time.Microsecond
		wctx, cancel := context.WithTimeoutCause(ctx, d, budget)
		_, err := q.AcquireWait(wctx, "held", "waiter-"+strconv.Itoa(i), time.Minute)
		ended := wctx.Err() != nil
		cancel()
		if !ended || !errors.Is(err, budget) {
			t.Fatalf("wait %d of %v: ended with %v (its context ended: %v), want its context's cause", i, d, err, ended)
		}
	}
}

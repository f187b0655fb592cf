package turnstile_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// TestInspectBadInput: bad arguments are refused before any round trip.
func TestInspectBadInput(t *testing.T) {
	c := newClient(t, refuseCalls{t})
	ctx := context.Background()
	long := strings.Repeat("k", turnstile.MaxKeyLen+1)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"Inspect empty key", second(c.Inspect(ctx, "")), turnstile.ErrInvalidKey},
		{"Inspect long key", second(c.Inspect(ctx, long)), turnstile.ErrInvalidKey},
		{"Inspect nil ctx", second(c.Inspect(nil, "k")), turnstile.ErrInvalidOption}, //lint:ignore SA1012 the nil context is the bad input under test
		{"ForceRelease empty key", second(c.ForceRelease(ctx, "")), turnstile.ErrInvalidKey},
		{"List limit 0", third(c.List(ctx, "p", 0)), turnstile.ErrInvalidOption},
		{"List negative limit", third(c.List(ctx, "p", -1)), turnstile.ErrInvalidOption},
		{"List long prefix", third(c.List(ctx, long, 10)), turnstile.ErrInvalidKey},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	var nilClient *turnstile.Client
	if _, err := nilClient.Inspect(ctx, "k"); !errors.Is(err, turnstile.ErrNilClient) {
		t.Errorf("nil Client Inspect: %v", err)
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

// TestInspectUnsupported: a backend without the capability gives
// ErrUnsupported, naming the backend, without a round trip.
func TestInspectUnsupported(t *testing.T) {
	c := newClient(t, refuseCalls{t})
	ctx := context.Background()
	_, err := c.Inspect(ctx, "k")
	_, _, lerr := c.List(ctx, "", 10)
	_, ferr := c.ForceRelease(ctx, "k")
	for _, err := range []error{err, lerr, ferr} {
		if !errors.Is(err, turnstile.ErrUnsupported) {
			t.Errorf("got %v, want ErrUnsupported", err)
			continue
		}
		var le *turnstile.LockError
		if !errors.As(err, &le) || le.Backend == "" || !strings.Contains(err.Error(), le.Backend) {
			t.Errorf("error %q does not name the backend", err)
		}
	}
}

// TestForceReleaseLogsAndReports: a forced release is logged at Warn
// with the key, the removed owner and its token, and observers get
// EventForceReleased.
func TestForceReleaseLogsAndReports(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	var events []turnstile.Event
	obs := turnstile.ObserverFunc(func(e turnstile.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	})
	b := memory.New()
	holder := newClient(t, b)
	op := newClient(t, b, turnstile.WithObserver(obs),
		turnstile.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	st, err := op.ForceRelease(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || st.Holders[0].Owner != l.Owner() || st.Holders[0].Token != l.Token() || st.Key != "stuck" {
		t.Errorf("ForceRelease returned %+v, want the lease's holder", st)
	}
	line := logs.String()
	for _, want := range []string{"level=WARN", "force-released", "key=stuck", "owner=" + l.Owner(), "token=" + strconv.FormatUint(l.Token(), 10)} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var got []turnstile.Event
	for _, e := range events {
		if e.Type == turnstile.EventForceReleased {
			got = append(got, e)
		}
	}
	if len(got) != 1 || got[0].Key != "stuck" || got[0].Owner != l.Owner() || got[0].Token != l.Token() || got[0].Backend != "memory" {
		t.Errorf("observer got %+v, want one FORCE_RELEASED event for the lease", got)
	}
	if s := turnstile.EventForceReleased.String(); s != "FORCE_RELEASED" {
		t.Errorf("EventForceReleased.String() = %q", s)
	}

	// A free key: nothing removed, no event.
	logs.Reset()
	events = events[:0]
	mu.Unlock()
	st, err = op.ForceRelease(ctx, "never-held")
	mu.Lock()
	if err != nil || st.Held {
		t.Errorf("ForceRelease of a free key = %+v, %v", st, err)
	}
	for _, e := range events {
		if e.Type == turnstile.EventForceReleased {
			t.Errorf("event %v for a key nobody held", e)
		}
	}
}

// TestForceReleasedHolderLosesLease: the holder of a force-released lock
// learns it at its next renewal: its lease's context ends with
// ErrLockLost within about one renewal interval.
func TestForceReleasedHolderLosesLease(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	const every = ttl / 3
	b := memory.New()
	holder := newClient(t, b, turnstile.WithTTL(ttl))
	op := newClient(t, b)
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	// Two renewals first, so that the lease is one the watchdog keeps.
	time.Sleep(2*every + every/2)
	if l.Context().Err() != nil {
		t.Fatalf("lease ended before the forced release: %v", context.Cause(l.Context()))
	}
	start := time.Now()
	if _, err := op.ForceRelease(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, ttl+5*time.Second, "the holder did not learn that its lock was force-released")
	took := time.Since(start)
	if cause := context.Cause(l.Context()); !errors.Is(cause, turnstile.ErrLockLost) {
		t.Errorf("cause %v, want ErrLockLost", cause)
	}
	// The next renewal is due within one interval; a descheduled
	// watchdog on a busy machine may take longer, but not a whole TTL
	// more, after which the lease would have ended anyway.
	if took > every+ttl {
		t.Errorf("the holder learned it after %v, want about one renewal interval (%v)", took, every)
	}
	t.Logf("lease lost %v after the forced release (renewal interval %v)", took, every)
}

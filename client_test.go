package turnstile_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, b interface {
	Acquire(context.Context, string, string, time.Duration) (uint64, bool, error)
	Extend(context.Context, string, string, time.Duration) (bool, error)
	Release(context.Context, string, string) (bool, error)
}, opts ...turnstile.Option) *turnstile.Client {
	t.Helper()
	c, err := turnstile.New(b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestBadInput: every bad input is refused at once with a clear error and
// without a round trip to the store.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, refuseCalls{t})
	var nilClient *turnstile.Client
	long := strings.Repeat("k", turnstile.MaxKeyLen+1)
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"empty key", func() error { _, err := c.Acquire(ctx, ""); return err }, turnstile.ErrInvalidKey},
		{"key over 512 bytes", func() error { _, err := c.TryAcquire(ctx, long); return err }, turnstile.ErrInvalidKey},
		{"ttl zero", func() error { _, err := c.Acquire(ctx, "k", turnstile.WithTTL(0)); return err }, turnstile.ErrInvalidTTL},
		{"ttl negative", func() error { _, err := c.Acquire(ctx, "k", turnstile.WithTTL(-time.Second)); return err }, turnstile.ErrInvalidTTL},
		{"ttl below 1ms", func() error { _, err := c.Acquire(ctx, "k", turnstile.WithTTL(500*time.Microsecond)); return err }, turnstile.ErrInvalidTTL},
		{"ttl 40ms", func() error { _, err := c.Acquire(ctx, "k", turnstile.WithTTL(40*time.Millisecond)); return err }, turnstile.ErrInvalidTTL},
		{"ttl just below MinTTL", func() error {
			_, err := c.Acquire(ctx, "k", turnstile.WithTTL(turnstile.MinTTL-time.Millisecond))
			return err
		}, turnstile.ErrInvalidTTL},
		{"ttl absurd", func() error { _, err := c.Acquire(ctx, "k", turnstile.WithTTL(100*24*time.Hour)); return err }, turnstile.ErrInvalidTTL},
		{"nil backend", func() error { _, err := turnstile.New(nil); return err }, turnstile.ErrNilBackend},
		{"nil client acquire", func() error { _, err := nilClient.Acquire(ctx, "k"); return err }, turnstile.ErrNilClient},
		{"nil client try", func() error { _, err := nilClient.TryAcquire(ctx, "k"); return err }, turnstile.ErrNilClient},
		{"nil client do", func() error {
			return turnstile.Do(ctx, nil, "k", func(context.Context, *turnstile.Lease) error { return nil })
		}, turnstile.ErrNilClient},
		{"nil client close", func() error { return nilClient.Close() }, turnstile.ErrNilClient},
		{"nil fn", func() error { return turnstile.Do(ctx, c, "k", nil) }, turnstile.ErrInvalidOption},
		{"nil context", func() error { _, err := c.Acquire(nil, "k"); return err }, turnstile.ErrInvalidOption}, //lint:ignore SA1012 the nil context is the bad input under test
		{"unknown scheme", func() error { _, err := turnstile.Open(ctx, "zookeeper9://x"); return err }, turnstile.ErrUnknownScheme},
		{"url without scheme", func() error { _, err := turnstile.Open(ctx, "127.0.0.1:6379"); return err }, turnstile.ErrInvalidURL},
		{"unparsable url", func() error { _, err := turnstile.Open(ctx, "redis://[::1"); return err }, turnstile.ErrInvalidURL},
		{"renew not shorter than ttl", func() error {
			_, err := turnstile.New(refuseCalls{t}, turnstile.WithTTL(time.Second), turnstile.WithRenewInterval(time.Second))
			return err
		}, turnstile.ErrInvalidOption},
		{"renew negative", func() error { _, err := c.Acquire(ctx, "k", turnstile.WithRenewInterval(-1)); return err }, turnstile.ErrInvalidOption},
		{"nil backoff", func() error { _, err := c.Acquire(ctx, "k", turnstile.WithBackoff(nil)); return err }, turnstile.ErrInvalidOption},
		{"zero backoff base", func() error {
			_, err := c.Acquire(ctx, "k", turnstile.WithBackoff(turnstile.Exponential{Cap: time.Second}))
			return err
		}, turnstile.ErrInvalidOption},
		{"cap below base", func() error {
			_, err := c.Acquire(ctx, "k", turnstile.WithBackoff(turnstile.Exponential{Base: time.Second, Cap: time.Millisecond}))
			return err
		}, turnstile.ErrInvalidOption},
		{"instance id with slash", func() error { _, err := turnstile.New(refuseCalls{t}, turnstile.WithInstanceID("a/b")); return err }, turnstile.ErrInvalidOption},
		{"empty instance id", func() error { _, err := turnstile.New(refuseCalls{t}, turnstile.WithInstanceID("")); return err }, turnstile.ErrInvalidOption},
		{"nil logger", func() error { _, err := turnstile.New(refuseCalls{t}, turnstile.WithLogger(nil)); return err }, turnstile.ErrInvalidOption},
		{"drift factor", func() error { _, err := turnstile.New(refuseCalls{t}, turnstile.WithClockDrift(0.9, 0)); return err }, turnstile.ErrInvalidOption},
		{"nil option", func() error { _, err := turnstile.New(refuseCalls{t}, nil); return err }, turnstile.ErrInvalidOption},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "turnstile: ") {
				t.Fatalf("error %q does not say where it comes from", err)
			}
		})
	}
}

func TestOpenMem(t *testing.T) {
	ctx := context.Background()
	c, err := turnstile.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "lock:inventory:12345")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := turnstile.Schemes(); len(got) == 0 || got[0] != "mem" {
		t.Fatalf("Schemes() = %v", got)
	}
}

func TestErrorsNameKeyAndBackend(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, memory.New())
	l, err := c.TryAcquire(ctx, "lock:order:7")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	_, err = c.TryAcquire(ctx, "lock:order:7")
	var le *turnstile.LockError
	if !errors.As(err, &le) || le.Key != "lock:order:7" || le.Op != "acquire" || le.Backend != "memory" {
		t.Fatalf("err = %#v", err)
	}
	if want := `turnstile: acquire "lock:order:7" on memory: lock not acquired`; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}

// TestOwnerIDs: owner ids carry the instance id and 128 random bits, and
// never repeat.
func TestOwnerIDs(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, memory.New(), turnstile.WithInstanceID("orders-7"))
	seen := make(map[string]bool)
	for i := range 2000 {
		l, err := c.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(i, err)
		}
		id, random, ok := strings.Cut(l.Owner(), "/")
		if !ok || id != "orders-7" || len(random) != 26 {
			t.Fatalf("owner %q: want instance id, '/', 26 base32 characters (128 bits)", l.Owner())
		}
		if seen[l.Owner()] {
			t.Fatalf("owner id %q reused", l.Owner())
		}
		seen[l.Owner()] = true
		_ = l.Release(ctx)
	}
}

func TestExponentialBackoff(t *testing.T) {
	e := turnstile.Exponential{Base: 10 * time.Millisecond, Cap: time.Second, MaxRetries: 10}
	var sum time.Duration
	for attempt := range 10 {
		ceiling := min(time.Second, 10*time.Millisecond<<attempt)
		for range 200 {
			d, ok := e.Delay(attempt)
			if !ok {
				t.Fatalf("attempt %d refused before MaxRetries", attempt)
			}
			if d < 0 || d >= ceiling {
				t.Fatalf("attempt %d delay %v outside [0, %v)", attempt, d, ceiling)
			}
			if attempt == 9 {
				sum += d
			}
		}
	}
	if _, ok := e.Delay(10); ok {
		t.Fatal("an 11th retry was allowed with MaxRetries 10")
	}
	// Full jitter: the mean of uniform [0, 1s) is 500ms; 200 samples keep
	// it well inside [350ms, 650ms].
	if mean := sum / 200; mean < 350*time.Millisecond || mean > 650*time.Millisecond {
		t.Fatalf("mean delay at the cap %v, want about 500ms (full jitter)", mean)
	}
	if _, ok := (turnstile.Exponential{Base: time.Millisecond, Cap: time.Second, MaxRetries: -1}).Delay(1000); !ok {
		t.Fatal("MaxRetries -1 must retry without end")
	}
	if _, ok := turnstile.NoRetry().Delay(0); ok {
		t.Fatal("NoRetry allowed a retry")
	}
}

func TestCloseEndsLeases(t *testing.T) {
	ctx := context.Background()
	c, err := turnstile.New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-l.Context().Done()
	if !errors.Is(context.Cause(l.Context()), turnstile.ErrClosed) {
		t.Fatalf("cause = %v, want ErrClosed", context.Cause(l.Context()))
	}
	if _, err := c.TryAcquire(ctx, "k2"); !errors.Is(err, turnstile.ErrClosed) {
		t.Fatalf("acquire after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// TestConcurrentReleaseAndRenewal races Release against the watchdog.
func TestConcurrentReleaseAndRenewal(t *testing.T) {
	ctx := context.Background()
	// Renewals every millisecond, so that many race a Release.
	c := newClient(t, memory.New(), turnstile.WithTTL(turnstile.MinTTL), turnstile.WithRenewInterval(time.Millisecond))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				l, err := c.Acquire(ctx, "k"+string(rune('a'+w)))
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					time.Sleep(time.Millisecond)
				}
				if err := l.Release(ctx); err != nil && !errors.Is(err, turnstile.ErrNotHeld) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestOpenErrorHidesPassword(t *testing.T) {
	_, err := turnstile.Open(context.Background(), "redis://user:s3cret@h:1 x")
	if !errors.Is(err, turnstile.ErrInvalidURL) {
		t.Fatalf("err = %v, want ErrInvalidURL", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error shows the password: %v", err)
	}
}

// TestAcquireDeadlineKeepsStoreError: when the wait runs out while the
// store is failing, the error says both.
func TestAcquireDeadlineKeepsStoreError(t *testing.T) {
	f := newFlaky()
	f.acquireErr = func() error { return errFlaky }
	c := newClient(t, f, turnstile.WithBackoff(turnstile.Exponential{Base: 5 * time.Millisecond, Cap: 10 * time.Millisecond, MaxRetries: -1}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v, want the deadline and the store error", err)
	}
}

func TestConstantBackoff(t *testing.T) {
	b := turnstile.Constant{Interval: 3 * time.Millisecond, MaxRetries: 2}
	for i := range 2 {
		if d, ok := b.Delay(i); !ok || d != 3*time.Millisecond {
			t.Fatalf("Delay(%d) = %v, %v", i, d, ok)
		}
	}
	if _, ok := b.Delay(2); ok {
		t.Fatal("a third retry of two")
	}
	if _, err := turnstile.New(memory.New(), turnstile.WithBackoff(turnstile.Constant{})); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("zero interval: %v", err)
	}
}

// TestOpenHostListWithIPv6: a list of hosts with IPv6 literals, which
// url.Parse refuses, reaches the backend as written; user information,
// path and query are parsed as usual. Anything else url.Parse refuses is
// still an invalid URL.
func TestOpenHostListWithIPv6(t *testing.T) {
	var got *url.URL
	turnstile.Register("hostlist-test", func(_ context.Context, u *url.URL, _ driver.OpenConfig) (driver.Backend, error) {
		got = u
		return memory.New(), nil
	})
	c, err := turnstile.Open(context.Background(), "hostlist-test://u:pw@[::1]:7000,[fe80::1%25eth0]:7001,h:7002/3?a=b#f")
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if pw, _ := got.User.Password(); got.Host != "[::1]:7000,[fe80::1%25eth0]:7001,h:7002" || got.User.Username() != "u" || pw != "pw" ||
		got.Path != "/3" || got.Query().Get("a") != "b" || got.Fragment != "f" {
		t.Fatalf("parsed %#v", got)
	}
	for _, bad := range []string{
		"hostlist-test://[::1]:7000,[::1] x:7001",
		"hostlist-test://[::1]:7000,[::1]:7001/%zz",
		"hostlist-test://u:pw@[::1:7000",
	} {
		if _, err := turnstile.Open(context.Background(), bad); !errors.Is(err, turnstile.ErrInvalidURL) || strings.Contains(err.Error(), "pw") {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL without the password", bad, err)
		}
	}
}

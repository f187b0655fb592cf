package turnstile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// mustElection returns c's election of name with opts, failing t on an
// error.
func mustElection(t *testing.T, c *turnstile.Client, name string, opts ...turnstile.Option) *turnstile.Election {
	t.Helper()
	e, err := c.Election(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mustCampaign campaigns in e with value until it leads, failing t on an
// error.
func mustCampaign(t *testing.T, ctx context.Context, e *turnstile.Election, value string) *turnstile.Leadership {
	t.Helper()
	l, err := e.Campaign(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestElectionBadInput: every bad argument is refused with a clear error
// before any round trip.
func TestElectionBadInput(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, refuseCalls{t})

	var nilClient *turnstile.Client
	if _, err := nilClient.Election("x"); !errors.Is(err, turnstile.ErrNilClient) {
		t.Errorf("Election on a nil Client = %v, want ErrNilClient", err)
	}
	for _, name := range []string{"", strings.Repeat("k", turnstile.MaxKeyLen+1)} {
		if _, err := c.Election(name); !errors.Is(err, turnstile.ErrInvalidKey) {
			t.Errorf("Election(%d-byte name) = %v, want ErrInvalidKey", len(name), err)
		}
	}
	if _, err := c.Election("x", turnstile.WithOwner("me")); !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "WithOwner") {
		t.Errorf("Election with WithOwner = %v, want ErrInvalidOption naming WithOwner", err)
	}
	if _, err := c.Election("x", turnstile.WithTTL(time.Millisecond)); !errors.Is(err, turnstile.ErrInvalidTTL) {
		t.Errorf("Election with a 1 ms TTL = %v, want ErrInvalidTTL", err)
	}
	if _, err := c.Election("x", turnstile.WithLogger(nil)); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("Election with a Client-wide option = %v, want ErrInvalidOption", err)
	}

	e := mustElection(t, c, "x")
	if e.Name() != "x" {
		t.Errorf("Name() = %q", e.Name())
	}
	for _, v := range []string{strings.Repeat("v", turnstile.MaxLeaderValueLen+1), "a\nb", "tab\there", "del\x7f"} {
		if _, err := e.Campaign(ctx, v); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("Campaign(%q) = %v, want ErrInvalidOption", v, err)
		}
		if _, err := e.TryCampaign(ctx, v); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("TryCampaign(%q) = %v, want ErrInvalidOption", v, err)
		}
	}
	//lint:ignore SA1012 a nil context is what is being tested
	if _, err := e.Campaign(nil, "v"); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("Campaign(nil ctx) = %v, want ErrInvalidOption", err)
	}
	for _, err := range e.Observe(ctx, -time.Second) {
		if !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("Observe with a negative interval = %v, want ErrInvalidOption", err)
		}
	}
	// refuseCalls is no driver.Inspector: who leads cannot be read.
	if _, err := e.Leader(ctx); !errors.Is(err, turnstile.ErrUnsupported) {
		t.Errorf("Leader on a backend that cannot inspect = %v, want ErrUnsupported", err)
	}
	n := 0
	for _, err := range e.Observe(ctx, 0) {
		n++
		if !errors.Is(err, turnstile.ErrUnsupported) {
			t.Errorf("Observe on a backend that cannot inspect = %v, want ErrUnsupported", err)
		}
	}
	if n != 1 {
		t.Errorf("Observe on a backend that cannot inspect yielded %d times, want once", n)
	}
}

// TestElectionSharedLockRefused: an election needs a lock one owner holds
// at a time.
func TestElectionSharedLockRefused(t *testing.T) {
	c := newClient(t, sharedStore{newNotifying()})
	if _, err := c.Election("x"); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Fatalf("Election on a shared lock = %v, want ErrInvalidOption", err)
	}
}

// TestElectionDefaultValue: an empty value announces the Client's
// instance id, and the term is the lease's token.
func TestElectionDefaultValue(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, memory.New(), turnstile.WithInstanceID("reports-7"))
	e := mustElection(t, c, "leader:reports")
	l := mustCampaign(t, ctx, e, "")
	if l.Value() != "reports-7" || l.Name() != "leader:reports" || l.Term() != l.Lease().Token() {
		t.Errorf("leadership: value %q name %q term %d token %d", l.Value(), l.Name(), l.Term(), l.Lease().Token())
	}
	ldr, err := e.Leader(ctx)
	if err != nil || !ldr.Elected || ldr.Value != "reports-7" || ldr.Term != l.Term() {
		t.Errorf("Leader = %+v, %v", ldr, err)
	}
	if got := ldr.String(); got != "reports-7 (term "+itoa(l.Term())+")" {
		t.Errorf("String() = %q", got)
	}
	if _, err := e.TryCampaign(ctx, "other"); !errors.Is(err, turnstile.ErrNotAcquired) {
		t.Errorf("TryCampaign while another leads = %v, want ErrNotAcquired", err)
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Resign(ctx); !errors.Is(err, turnstile.ErrNotHeld) {
		t.Errorf("second Resign = %v, want ErrNotHeld", err)
	}
	if ldr, err := e.Leader(ctx); err != nil || ldr.Elected || ldr.String() != "no leader" {
		t.Errorf("Leader after Resign = %+v (%s), %v", ldr, ldr, err)
	}
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestCampaignWaitsPastTheBackoff: a candidate keeps waiting after the
// Client's Backoff would have given up, and leads once the leader
// resigns; the leader's lost lease cancels its context.
func TestCampaignWaitsPastTheBackoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := memory.New()
	short := turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 2 * time.Millisecond, MaxRetries: 2})
	a := newClient(t, store, short, turnstile.WithoutNotifications())
	b := newClient(t, store, short, turnstile.WithoutNotifications())
	ea, _ := a.Election("e")
	// The caller's own finite backoff too; a short TTL so that the
	// removed lock is noticed at the first renewal.
	eb, _ := b.Election("e", short, turnstile.WithTTL(600*time.Millisecond))
	la := mustCampaign(t, ctx, ea, "a")
	won := make(chan *turnstile.Leadership, 1)
	go func() {
		l, err := eb.Campaign(ctx, "b")
		if err != nil {
			t.Errorf("Campaign: %v", err)
		}
		won <- l
	}()
	// Far longer than two retries of at most 2 ms each.
	time.Sleep(100 * time.Millisecond)
	select {
	case <-won:
		t.Fatal("the candidate led while the leader still led")
	default:
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-won
	if lb == nil {
		return
	}
	if lb.Term() <= la.Term() {
		t.Errorf("term %d after %d", lb.Term(), la.Term())
	}
	store.Evict("e")
	select {
	case <-lb.Context().Done():
		if !errors.Is(context.Cause(lb.Context()), turnstile.ErrLockLost) {
			t.Errorf("cause = %v, want ErrLockLost", context.Cause(lb.Context()))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("leadership not lost after the lock was removed")
	}
}

// TestObserveStopsWithContext: an Observe iteration ends when its context
// ends, and when the caller breaks out of it.
func TestObserveStopsWithContext(t *testing.T) {
	c := newClient(t, memory.New())
	e, _ := c.Election("e")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	for ldr, err := range e.Observe(ctx, time.Millisecond) {
		if err != nil || ldr.Elected {
			t.Fatalf("report %v, %v", ldr, err)
		}
		n++
		cancel()
	}
	if n != 1 {
		t.Errorf("%d reports of an unchanging election, want 1", n)
	}
	for range e.Observe(context.Background(), time.Millisecond) {
		break
	}
	_ = c.Close()
	for _, err := range e.Observe(context.Background(), time.Millisecond) {
		if !errors.Is(err, turnstile.ErrClosed) {
			t.Errorf("Observe after Close = %v, want ErrClosed", err)
		}
	}
}

// FuzzLeaderValue: a value Campaign accepts is what observers read back,
// whatever bytes it holds ('/' included); one it refuses is refused with
// ErrInvalidOption, never a panic.
func FuzzLeaderValue(f *testing.F) {
	for _, s := range []string{"", "10.0.0.7:8080", "a/b/c", "/", "ü", "a\nb", strings.Repeat("x", 200), "host-1/"} {
		f.Add(s)
	}
	ctx := context.Background()
	c, err := turnstile.New(memory.New(), turnstile.WithInstanceID("inst"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	e, err := c.Election("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		l, err := e.TryCampaign(ctx, v)
		if err != nil {
			if !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Fatalf("TryCampaign(%q) = %v, want success or ErrInvalidOption", v, err)
			}
			return
		}
		defer l.Resign(ctx)
		want := v
		if v == "" {
			want = "inst"
		}
		ldr, err := e.Leader(ctx)
		if err != nil || ldr.Value != want || l.Value() != want {
			t.Fatalf("value %q read back as %q (leadership %q), %v", v, ldr.Value, l.Value(), err)
		}
	})
}

// TestCampaignWithNoRetryWaits: a candidate given NoRetry still waits for
// leadership, on the default delays, instead of trying in a loop.
func TestCampaignWithNoRetryWaits(t *testing.T) {
	ctx := context.Background()
	n := newNotifying()
	c := newClient(t, n, turnstile.WithoutNotifications(), turnstile.WithoutCoalescing())
	e := mustElection(t, c, "e", turnstile.WithBackoff(turnstile.NoRetry()))
	l := mustCampaign(t, ctx, e, "a")
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	before := n.acquires.Load()
	if _, err := e.Campaign(wctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign while another leads = %v, want DeadlineExceeded", err)
	}
	// The default backoff makes about ten attempts in 300 ms (10, 20, 40,
	// ... ms ceilings, full jitter); a loop would make thousands.
	if tries := n.acquires.Load() - before; tries > 60 {
		t.Errorf("%d attempts in 300 ms: the candidate polled in a loop", tries)
	}
	_ = l.Resign(ctx)
}

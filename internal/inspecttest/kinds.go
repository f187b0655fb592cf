package inspecttest

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
)

// Kind is one lock kind's case of a forced release: Acquire takes the
// lock for each of Owners, and a Client over Inspect, a view of the same
// kind, removes it.
type Kind struct {
	Name             string
	Acquire, Inspect driver.Backend
	Owners           []string
}

// Kinds are the cases of b's reentrant lock, held twice by one owner;
// of the read side read, held by two readers and removed through the
// write side write; of the write side, removed through the read side;
// and of a semaphore of 3 permits held by two owners, removed through a
// view of 1 permit.
func Kinds(t *testing.T, b, read, write driver.Backend) []Kind {
	t.Helper()
	view := locktest.View[driver.Backend](t)
	return []Kind{
		{"reentrant", view(turnstile.Reentrant(b)), view(turnstile.Reentrant(b)), []string{"a", "a"}},
		{"read", read, write, []string{"a", "b"}},
		{"write", write, read, []string{"w"}},
		{"semaphore", view(turnstile.Semaphore(b, 3)), view(turnstile.Semaphore(b, 1)), []string{"a", "b"}},
	}
}

// ForceKind takes key in k's kind for each of its owners for ttl and
// removes every hold through cl, a Client over k.Inspect: ForceRelease
// reports the holders, with their tokens and time left, and a floor
// above their tokens; removed, when not nil, checks the returned state
// further. Then the holders' renewals fail, the key reads as free with
// the floor as its last token, a second ForceRelease finds nothing held,
// and the next acquisition's token is above the floor.
func ForceKind(t *testing.T, ctx context.Context, cl *turnstile.Client, k Kind, key string, ttl time.Duration, removed func(driver.LockState)) {
	t.Helper()
	var tok uint64
	want := map[string]bool{}
	for _, o := range k.Owners {
		tk, ok, err := k.Acquire.Acquire(ctx, key, o, ttl)
		if !ok || err != nil {
			t.Fatalf("acquire by %s: %v, %v", o, ok, err)
		}
		tok, want[o] = max(tok, tk), true
	}
	st, err := cl.ForceRelease(ctx, key)
	if err != nil || !st.Held || len(st.Holders) != len(want) || st.Token <= tok {
		t.Fatalf("ForceRelease = %+v, %v; want holders %v and a floor above %d", st, err, k.Owners, tok)
	}
	for _, h := range st.Holders {
		if !want[h.Owner] || h.Token == 0 || h.Token > tok || h.TTL <= 0 || h.TTL > ttl {
			t.Fatalf("removed holder %+v: want one of %v with a token up to %d and up to %v left", h, k.Owners, tok, ttl)
		}
	}
	if removed != nil {
		removed(st)
	}
	for o := range want {
		if ok, err := k.Acquire.Extend(ctx, key, o, ttl); ok || err != nil {
			t.Fatalf("Extend by %s after ForceRelease = %v, %v; want false", o, ok, err)
		}
	}
	if after, err := cl.Inspect(ctx, key); err != nil || after.Held || after.Token != st.Token {
		t.Fatalf("Inspect after ForceRelease = %+v, %v; want free, last token the floor %d", after, err, st.Token)
	}
	if again, err := cl.ForceRelease(ctx, key); err != nil || again.Held || again.Token != st.Token {
		t.Fatalf("a second ForceRelease = %+v, %v; want not held, token %d", again, err, st.Token)
	}
	next, ok, err := k.Acquire.Acquire(ctx, key, "next", ttl)
	if !ok || err != nil || next <= st.Token {
		t.Fatalf("next acquisition = %d, %v, %v; want a token above the floor %d", next, ok, err, st.Token)
	}
}

// WriterClaimStays checks that a forced release through cl, a Client
// over the read side read, removes the reader of key but leaves the
// claim of a writer refused meanwhile through write: new readers are
// refused, and the writer takes the key.
func WriterClaimStays(t *testing.T, ctx context.Context, cl *turnstile.Client, read, write driver.Backend, ttl time.Duration) {
	t.Helper()
	const key = "kinds-force/claim"
	if _, ok, err := read.Acquire(ctx, key, "r", ttl); !ok || err != nil {
		t.Fatalf("read lock: %v, %v", ok, err)
	}
	if _, ok, err := write.Acquire(ctx, key, "w", ttl); ok || err != nil {
		t.Fatalf("write lock while read = %v, %v; want refused, leaving a claim", ok, err)
	}
	if st, err := cl.ForceRelease(ctx, key); err != nil || len(st.Holders) != 1 || st.Holders[0].Owner != "r" {
		t.Fatalf("ForceRelease = %+v, %v; want the reader removed", st, err)
	}
	if _, ok, err := read.Acquire(ctx, key, "r2", ttl); ok || err != nil {
		t.Fatalf("a new reader while the writer's claim stands = %v, %v; want refused", ok, err)
	}
	if _, ok, err := write.Acquire(ctx, key, "w", ttl); !ok || err != nil {
		t.Fatalf("the waiting writer after the readers went = %v, %v", ok, err)
	}
}

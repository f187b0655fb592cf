// Package inspecttest holds the tests of the operator's calls (Inspect,
// List and ForceRelease) and of the lock kinds that several store
// modules run alike, each against its own server. The cases every store
// must pass are in locktest; these check what stores of one family have
// in common: the SQL stores, which keep a key's row with its last token
// and have no queue, and the stores with a queue of waiters.
package inspecttest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// Operator is a backend with the operator's calls.
type Operator interface {
	driver.Backend
	driver.Inspector
	driver.ForceReleaser
}

// Waiter is a backend that waits in a key's queue.
type Waiter interface {
	driver.Backend
	driver.Queuer
}

// Cancelled checks that ForceRelease, Inspect and List with a cancelled
// context return an error matching context.Canceled.
func Cancelled(t *testing.T, b Operator) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.ForceRelease(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ForceRelease with a cancelled context: %v", err)
	}
	if _, err := b.Inspect(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Inspect with a cancelled context: %v", err)
	}
	if _, _, err := b.List(ctx, "", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("List with a cancelled context: %v", err)
	}
}

// HoldEach takes each of keys through b for ten seconds, owned by
// "owner-" and the key, and returns their tokens by key.
func HoldEach(t *testing.T, ctx context.Context, b driver.Backend, keys ...string) map[string]uint64 {
	t.Helper()
	toks := map[string]uint64{}
	for _, k := range keys {
		tok, ok, err := b.Acquire(ctx, k, "owner-"+k, 10*time.Second)
		if err != nil || !ok {
			t.Fatalf("Acquire %q = %v, %v", k, ok, err)
		}
		toks[k] = tok
	}
	return toks
}

// HoldReleased takes key through b and releases it.
func HoldReleased(t *testing.T, ctx context.Context, b driver.Backend, key string) {
	t.Helper()
	if _, ok, err := b.Acquire(ctx, key, "x", 10*time.Second); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := b.Release(ctx, key, "x"); !ok || err != nil {
		t.Fatal(ok, err)
	}
}

// FirstPage checks that List of prefix "ls/" with limit 2, where ls/a,
// ls/b and more are held, returns those two and says there are more.
func FirstPage(t *testing.T, ctx context.Context, b driver.Inspector) {
	t.Helper()
	page, more, err := b.List(ctx, "ls/", 2)
	if err != nil || !more || len(page) != 2 || page[0].Key != "ls/a" || page[1].Key != "ls/b" {
		t.Fatalf("List(ls/, 2) = %+v, more=%v, %v; want ls/a, ls/b and more", page, more, err)
	}
}

// TwoWaiting checks Inspect through b of key, held by holder, while bob
// and carol wait for it through backends from waiter: it reports the
// holder and 2 waiters. Then the waits are cancelled, and each ends with
// an error matching context.Canceled. queued returns once both stand in
// key's queue.
func TwoWaiting(t *testing.T, ctx context.Context, b driver.Inspector, key, holder string, waiter func() Waiter, queued func()) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	for _, o := range []string{"bob", "carol"} {
		w := waiter()
		go func() { _, err := w.AcquireWait(wctx, key, o, 10*time.Second); errs <- err }()
	}
	queued()
	st, err := b.Inspect(ctx, key)
	if err != nil || st.Waiters != 2 || st.Holders[0].Owner != holder {
		t.Fatalf("Inspect with two queued = %+v, %v; want alice holding, 2 waiters", st, err)
	}
	cancel()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
	}
}

// WakesWaiter checks a forced release of key, held through holder for a
// minute, while waiter waits for it: op reports the holder with its
// token and one waiter, the waiter is woken with a token above the
// returned floor, and the removed holder's Extend is refused. queued
// returns once the waiter stands in key's queue.
func WakesWaiter(t *testing.T, key string, holder driver.Backend, waiter Waiter, op driver.ForceReleaser, queued func()) {
	t.Helper()
	ctx := testserver.Ctx(t, 60*time.Second)
	// Held for a minute: only the forced release can let the waiter in.
	tok, ok, err := holder.Acquire(ctx, key, "stuck", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	type res struct {
		tok uint64
		err error
	}
	got := make(chan res, 1)
	go func() {
		tok, err := waiter.AcquireWait(ctx, key, "waiter", 10*time.Second)
		got <- res{tok, err}
	}()
	queued()
	st, err := op.ForceRelease(ctx, key)
	if err != nil || !st.Held || st.Holders[0].Owner != "stuck" || st.Holders[0].Token != tok || st.Waiters != 1 {
		t.Fatalf("ForceRelease = %+v, %v; want stuck with token %d and 1 waiter", st, err, tok)
	}
	select {
	case r := <-got:
		if r.err != nil || r.tok <= st.Token {
			t.Fatalf("waiter got %d, %v; want a token above the floor %d", r.tok, r.err, st.Token)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the queued waiter was not woken by the forced release")
	}
	if ok, err := holder.Extend(ctx, key, "stuck", time.Minute); ok || err != nil {
		t.Fatalf("Extend by the removed holder = %v, %v; want false", ok, err)
	}
	if ok, err := waiter.Release(ctx, key, "waiter"); !ok || err != nil {
		t.Fatal(ok, err)
	}
}

// InspectNeverLocked checks Inspect of a key never locked on a store
// whose keys have no queue: free, no holders, token 0, Waiters -1.
func InspectNeverLocked(t *testing.T, b driver.Inspector) {
	t.Helper()
	st, err := b.Inspect(testserver.Ctx(t, 10*time.Second), "inspect-never")
	if err != nil || st.Held || len(st.Holders) != 0 || st.Waiters != -1 || st.Token != 0 || st.Key != "inspect-never" {
		t.Fatalf("Inspect of a key never locked = %+v, %v; want free, token 0, waiters -1", st, err)
	}
}

// ForceNeverLocked checks ForceRelease of a key never locked: not held,
// no holders, token 0.
func ForceNeverLocked(t *testing.T, b driver.ForceReleaser) {
	t.Helper()
	st, err := b.ForceRelease(testserver.Ctx(t, 10*time.Second), "force-never")
	if err != nil || st.Held || len(st.Holders) != 0 || st.Token != 0 {
		t.Fatalf("ForceRelease of a key never locked = %+v, %v; want not held, token 0", st, err)
	}
}

// HeldThenReleased checks Inspect through other of a key held through b
// on a store that keeps a released key's row: the holder with its token
// and up to ten seconds left, Waiters -1; after the release the key is
// free and keeps its last token.
func HeldThenReleased(t *testing.T, b, other Operator) {
	t.Helper()
	ctx := testserver.Ctx(t, 30*time.Second)
	const k = "inspect-held"
	tok, ok, err := b.Acquire(ctx, k, "alice", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	st, err := other.Inspect(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	h := st.Holders
	if !st.Held || len(h) != 1 || h[0].Owner != "alice" || h[0].Token != tok || st.Token != tok || st.Waiters != -1 {
		t.Fatalf("Inspect of a held key = %+v; want alice with token %d, waiters -1", st, tok)
	}
	if h[0].TTL <= 0 || h[0].TTL > 10*time.Second {
		t.Fatalf("TTL left = %v, want in (0, 10s]", h[0].TTL)
	}
	if ok, err := b.Release(ctx, k, "alice"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	// The row stays, and with it the last token issued.
	if st, err := b.Inspect(ctx, k); err != nil || st.Held || len(st.Holders) != 0 || st.Token != tok {
		t.Fatalf("Inspect after release = %+v, %v; want free with token %d", st, err, tok)
	}
}

// ListHeld checks List on a store that keeps released and expired rows,
// lists keys in byte order and has no queue (Waiters -1). It holds ls/a,
// ls/b, ls/c, ls/ü and odd, a key under "ls/" that sorts after them; keys
// beside the prefix: ls0, lsx, other and ls_%, whose characters LIKE
// would take for a pattern; and extra, keys the store lists under other
// names than "ls". It returns the tokens of the keys it took, by key.
func ListHeld(t *testing.T, ctx context.Context, b Operator, odd string, extra ...string) map[string]uint64 {
	t.Helper()
	keys := append([]string{"ls/a", "ls/b", "ls/c", "ls/ü", odd, "ls0", "lsx", "other", "ls_%"}, extra...)
	toks := HoldEach(t, ctx, b, keys...)
	// Released and expired rows stay in the table; they are not listed.
	HoldReleased(t, ctx, b, "ls/released")
	if _, ok, err := b.Acquire(ctx, "ls/expired", "x", 20*time.Millisecond); !ok || err != nil {
		t.Fatal(ok, err)
	}
	time.Sleep(100 * time.Millisecond)

	want := []string{"ls/a", "ls/b", "ls/c", "ls/ü", odd}
	all, more, err := b.List(ctx, "ls/", 10)
	if err != nil || more || len(all) != len(want) {
		t.Fatalf("List(ls/, 10) = %+v, more=%v, %v; want %q, no more", all, more, err, want)
	}
	for i, k := range want {
		st := all[i]
		if st.Key != k || !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != "owner-"+k || st.Holders[0].Token != toks[k] ||
			st.Token != toks[k] || st.Holders[0].TTL <= 0 || st.Holders[0].TTL > 10*time.Second || st.Waiters != -1 {
			t.Fatalf("List entry %d = %+v; want %q held by owner-%s with token %d", i, st, k, k, toks[k])
		}
	}
	FirstPage(t, ctx, b)
	if page, more, err := b.List(ctx, "ls/", 5); err != nil || more || len(page) != 5 {
		t.Fatalf("List(ls/, 5) of 5 = %d states, more=%v, %v; want 5, no more", len(page), more, err)
	}
	for prefix, n := range map[string]int{"ls": 8, "ls_": 1, "ls_%": 1, odd: 1, "ls/ü": 1, "nothing-here/": 0} {
		got, more, err := b.List(ctx, prefix, 100)
		if err != nil || more || len(got) != n {
			t.Fatalf("List(%q, 100) = %+v, more=%v, %v; want %d", prefix, got, more, err, n)
		}
		for _, st := range got {
			if !strings.HasPrefix(st.Key, prefix) {
				t.Fatalf("List(%q) returned %q", prefix, st.Key)
			}
		}
	}
	if got, _, err := b.List(ctx, "", 1000); err != nil || len(got) < len(keys) {
		t.Fatalf("List of every key = %d states, %v; want at least the %d held here", len(got), err, len(keys))
	}
	for _, limit := range []int{0, -1} {
		if _, _, err := b.List(ctx, "ls/", limit); !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("List with limit %d: %v, want an error about the limit", limit, err)
		}
	}
	return toks
}

// ForceOwnHolder checks ForceRelease through b, the Backend that holds
// the lock, on a store whose lock is a session lock of b's connection:
// the lock goes at once, so other takes the key straight away with a
// token above the floor, and the removed holder's Extend and Release are
// refused.
func ForceOwnHolder(t *testing.T, b, other Operator) {
	t.Helper()
	ctx := testserver.Ctx(t, 30*time.Second)
	const k = "force-own"
	tok, ok, err := b.Acquire(ctx, k, "stuck", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, ok, err := other.Acquire(ctx, k, "next", time.Minute); ok || err != nil {
		t.Fatalf("Acquire of a held key = %v, %v", ok, err)
	}
	st, err := b.ForceRelease(ctx, k)
	if err != nil || !st.Held || st.Holders[0].Owner != "stuck" || st.Holders[0].Token != tok {
		t.Fatalf("ForceRelease = %+v, %v", st, err)
	}
	next, ok, err := other.Acquire(ctx, k, "next", time.Minute)
	if err != nil || !ok || next <= st.Token {
		t.Fatalf("Acquire right after the forced release = %d, %v, %v; want a token above %d", next, ok, err, st.Token)
	}
	if ok, err := b.Extend(ctx, k, "stuck", time.Minute); ok || err != nil {
		t.Fatalf("Extend by the removed holder = %v, %v; want false", ok, err)
	}
	if ok, err := b.Release(ctx, k, "stuck"); ok || err != nil {
		t.Fatalf("Release by the removed holder = %v, %v; want false", ok, err)
	}
}

package fence_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
)

func TestMemoryTokens(t *testing.T) {
	m := fence.NewMemory()
	const r = "inventory:1"
	var value uint64
	write := func(tok uint64) func() error {
		return func() error { value = tok; return nil }
	}

	if err := m.Do(r, 43, write(43)); err != nil {
		t.Fatalf("first write: %v", err)
	}
	wantStale(t, m.Do(r, 42, write(42)), r, 42, 43)
	wantStale(t, m.Do(r, 43, write(43)), r, 43, 43) // equal: refused by default
	if value != 43 || m.Last(r) != 43 {
		t.Fatalf("value %d, last %d after stale writes, want 43, 43", value, m.Last(r))
	}
	if err := m.Do(r, 44, write(44)); err != nil {
		t.Fatalf("larger token: %v", err)
	}
	if value != 44 || m.Last(r) != 44 {
		t.Fatalf("value %d, last %d, want 44, 44", value, m.Last(r))
	}
	if got := m.Last("inventory:2"); got != 0 {
		t.Fatalf("Last of an unwritten resource = %d, want 0", got)
	}
	// Resources are independent.
	if err := m.Do("inventory:2", 1, write(1)); err != nil {
		t.Fatalf("other resource: %v", err)
	}
}

func TestMemoryAllowSameToken(t *testing.T) {
	m := fence.NewMemory(fence.AllowSameToken())
	const r = "order:7"
	n := 0
	inc := func() error { n++; return nil }
	for range 3 {
		if err := m.Do(r, 5, inc); err != nil {
			t.Fatalf("same token: %v", err)
		}
	}
	wantStale(t, m.Do(r, 4, inc), r, 4, 5)
	if n != 3 {
		t.Fatalf("write ran %d times, want 3", n)
	}
}

// TestMemoryFailedWriteRecordsNothing: a write that fails leaves the last
// token as it was, so the same token may try again.
func TestMemoryFailedWriteRecordsNothing(t *testing.T) {
	m := fence.NewMemory()
	boom := errors.New("disk full")
	if err := m.Do("r", 9, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the write's error", err)
	}
	if got := m.Last("r"); got != 0 {
		t.Fatalf("Last after a failed write = %d, want 0", got)
	}
	if err := m.Do("r", 9, func() error { return nil }); err != nil {
		t.Fatalf("retry with the same token: %v", err)
	}
}

// TestMemoryConcurrentWriters: the write of the largest token is the one
// left, whatever the order the goroutines run in.
func TestMemoryConcurrentWriters(t *testing.T) {
	m := fence.NewMemory()
	var value uint64 // written only under the guard
	var wg sync.WaitGroup
	for i := range 64 {
		tok := uint64(i*7919%64 + 1)
		wg.Go(func() {
			_ = m.Do("r", tok, func() error { value = tok; return nil })
		})
	}
	wg.Wait()
	if value != 64 || m.Last("r") != 64 {
		t.Fatalf("value %d, last %d, want 64, 64", value, m.Last("r"))
	}
}

func TestMemoryBadInput(t *testing.T) {
	ok := func() error { return nil }
	long := strings.Repeat("k", turnstile.MaxKeyLen+1)
	var nilMemory *fence.Memory
	for _, tc := range []struct {
		name string
		m    *fence.Memory
		res  string
		tok  uint64
		fn   func() error
		want error
	}{
		{"empty resource", fence.NewMemory(), "", 1, ok, turnstile.ErrInvalidKey},
		{"long resource", fence.NewMemory(), long, 1, ok, turnstile.ErrInvalidKey},
		{"zero token", fence.NewMemory(), "r", 0, ok, fence.ErrInvalidToken},
		{"nil write", fence.NewMemory(), "r", 1, nil, turnstile.ErrInvalidOption},
		{"nil option", fence.NewMemory(nil), "r", 1, ok, turnstile.ErrInvalidOption},
		{"table option", fence.NewMemory(fence.WithTable("t")), "r", 1, ok, turnstile.ErrInvalidOption},
		{"bad table option", fence.NewMemory(fence.WithTable("Bad Name")), "r", 1, ok, turnstile.ErrInvalidOption},
		{"Redis keys option", fence.NewMemory(fence.WithKeysOf(keyPrefix("app:"))), "r", 1, ok, turnstile.ErrInvalidOption},
		{"nil memory", nilMemory, "r", 1, ok, turnstile.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			fn := tc.fn
			if fn != nil {
				fn = func() error { ran = true; return nil }
			}
			err := tc.m.Do(tc.res, tc.tok, fn)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if ran {
				t.Fatal("the write ran")
			}
		})
	}
	if got := nilMemory.Last("r"); got != 0 {
		t.Fatalf("Last on a nil Memory = %d", got)
	}
}

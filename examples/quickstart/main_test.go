package main

import (
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// TestQuickstart runs the quickstart end to end on a real redis-server
// (the test machine has one: scripts/test.sh installs it) and checks what it
// claims: exactly 5 orders for 5 units, the lost lease noticed and its
// release refused, the waiter served after the holder.
func TestQuickstart(t *testing.T) {
	if !redisproc.Available() {
		t.Fatal(redisproc.ErrNotInstalled)
	}
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"a real redis-server started",
		"under lock:inventory:12345: 5 orders, stock left 0",
		"lease context was cancelled",
		"lock lost",
		"its Release is refused (ErrNotHeld)",
		"lock not acquired",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

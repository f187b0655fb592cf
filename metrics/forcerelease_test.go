package metrics_test

import (
	"context"
	"testing"

	"github.com/turnstilelock/turnstile/memory"
)

// TestForceReleaseCounted: a lock an operator removes by force is counted
// in force_releases_total of the operator's Client's backend; a forced
// release of a free key is not.
func TestForceReleaseCounted(t *testing.T) {
	b := memory.New()
	c, _, reg, _ := newClient(t, b)
	ctx := context.Background()
	if _, err := c.Acquire(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForceRelease(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForceRelease(ctx, "never-held"); err != nil {
		t.Fatal(err)
	}
	if v := value(t, reg, "turnstile_force_releases_total", "backend", "memory"); v != 1 {
		t.Errorf("turnstile_force_releases_total = %v, want 1", v)
	}
}

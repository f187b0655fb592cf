package turnstile_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
)

// TestPermissionEndsTheWait: a store that refuses the user a permission,
// or the view's settings (a semaphore's other number of permits), ends
// Acquire at its first attempt, however patient the Backoff, with an
// error that is ErrPermission or ErrInvalidOption and still says what was
// refused; other store failures are retried.
func TestPermissionEndsTheWait(t *testing.T) {
	refused := fmt.Errorf("%w: NOPERM no permissions to run the 'evalsha' command", turnstile.ErrPermission)
	for _, c := range []struct {
		name      string
		err       error
		wantTries int32
	}{
		{"permission", refused, 1},
		{"settings", fmt.Errorf("%w: the permits of \"k\" are held with 2 permits; this semaphore has 3", turnstile.ErrInvalidOption), 1},
		{"other failure", errFlaky, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFlaky()
			var tries atomic.Int32
			f.acquireErr = func() error { tries.Add(1); return c.err }
			client := newClient(t, f, turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: time.Millisecond, MaxRetries: 3}))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := client.Acquire(ctx, "k")
			if !errors.Is(err, c.err) {
				t.Fatalf("Acquire: %v, want %v", err, c.err)
			}
			if got := tries.Load(); got != c.wantTries {
				t.Fatalf("%d attempts, want %d", got, c.wantTries)
			}
			if c.err == refused && !errors.Is(err, turnstile.ErrPermission) {
				t.Fatalf("Acquire: %v is not ErrPermission", err)
			}
		})
	}
}

package redis_test

import (
	"errors"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/redis"
)

// TestRaiseGuard: RaiseGuard raises an existing guard key under the
// backend's prefix to the floor, leaves one at or above it and a missing
// one as they are, and refuses a floor no token can reach.
func TestRaiseGuard(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv, redis.WithPrefix("app:"))
	srv.MustDo(t, "SET", "app:{k}:guard", "100")
	srv.MustDo(t, "SET", "{k}:guard", "5") // another prefix's
	for _, tc := range []struct {
		floor   uint64
		changed bool
		want    string
	}{{100, false, "100"}, {90, false, "100"}, {160, true, "160"}} {
		if changed, err := b.RaiseGuard(ctx, "k", tc.floor); err != nil || changed != tc.changed {
			t.Errorf("RaiseGuard(%d) = %v, %v; want %v", tc.floor, changed, err, tc.changed)
		}
		if got := srv.MustDo(t, "GET", "app:{k}:guard"); got != tc.want {
			t.Errorf("after RaiseGuard(%d) the guard is %s, want %s", tc.floor, got, tc.want)
		}
	}
	if got := srv.MustDo(t, "GET", "{k}:guard"); got != "5" {
		t.Errorf("RaiseGuard changed another prefix's guard to %s", got)
	}
	if changed, err := b.RaiseGuard(ctx, "none", 160); changed || err != nil {
		t.Errorf("RaiseGuard of a missing guard = %v, %v", changed, err)
	}
	if n := srv.MustDo(t, "EXISTS", "app:{none}:guard"); n != "0" {
		t.Error("RaiseGuard created a guard key")
	}
	for _, floor := range []uint64{0, 1 << 53} {
		if _, err := b.RaiseGuard(ctx, "k", floor); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("RaiseGuard(%d) = %v, want ErrInvalidOption", floor, err)
		}
	}
	if _, err := b.RaiseGuard(ctx, "", 16); !errors.Is(err, turnstile.ErrInvalidKey) {
		t.Errorf("RaiseGuard of an empty key = %v, want ErrInvalidKey", err)
	}
}

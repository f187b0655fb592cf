package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/inspecttest"
)

// TestKindsForceRelease: through a Client, each kind's view removes
// every hold of its kind on a key by force: the holders' renewals fail,
// the returned floor is above their tokens and below the next one, the
// resource's fence in turnstile_fences is raised to it, and a waiting
// writer's claim stays.
func TestKindsForceRelease(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	c := sqlConn(t, srv)
	if err := fence.Migrate(ctx, c); err != nil {
		t.Fatal(err)
	}
	b := dial(t, srv)
	read, write, err := turnstile.ReadWrite(b)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 10 * time.Second
	for _, k := range inspecttest.Kinds(t, b, read, write) {
		t.Run(k.Name, func(t *testing.T) {
			key := "kinds-force/" + k.Name
			cl, err := turnstile.New(k.Inspect)
			if err != nil {
				t.Fatal(err)
			}
			if st, err := cl.ForceRelease(ctx, key); err != nil || st.Held || st.Token != 0 {
				t.Fatalf("ForceRelease of a key never locked = %+v, %v; want not held, token 0", st, err)
			}
			inspecttest.ForceKind(t, ctx, cl, k, key, ttl, func(st driver.LockState) {
				guard, err := fence.NewPostgres(fence.AllowSameToken())
				if err != nil {
					t.Fatal(err)
				}
				if last, err := guard.Last(ctx, c, key); err != nil || last != st.Token {
					t.Fatalf("fence of %q = %d, %v; want the floor %d", key, last, err, st.Token)
				}
			})
		})
	}

	t.Run("WriterClaimStays", func(t *testing.T) {
		cl, err := turnstile.New(read)
		if err != nil {
			t.Fatal(err)
		}
		inspecttest.WriterClaimStays(t, ctx, cl, read, write, ttl)
	})

	t.Run("Cancelled", func(t *testing.T) {
		cl, err := turnstile.New(read)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := cl.ForceRelease(cctx, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("ForceRelease with a cancelled context: %v", err)
		}
	})
}

package mysql_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/inspecttest"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/mysql"
)

func TestInspect(t *testing.T) {
	srv := testserver.StartMySQL(t)
	b := dial(t, srv)

	t.Run("Free", func(t *testing.T) { inspecttest.InspectNeverLocked(t, b) })
	t.Run("HeldThenReleased", func(t *testing.T) { inspecttest.HeldThenReleased(t, b, dial(t, srv)) })

	t.Run("List", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		long := "ls/" + strings.Repeat("x", 70) // stored under a hashed name
		toks := inspecttest.ListHeld(t, ctx, b, "ls/\xff", long)
		// The long key is listed under its name.
		name := mysql.LockName(long)
		got, _, err := b.List(ctx, name[:10], 100)
		if err != nil || len(got) != 1 || got[0].Key != name || got[0].Holders[0].Owner != "owner-"+long || got[0].Token != toks[long] {
			t.Fatalf("List(%q) = %+v, %v; want the long key under its name %s", name[:10], got, err, name)
		}
		if _, _, err := b.List(ctx, long, 10); !errors.Is(err, turnstile.ErrInvalidKey) || !strings.Contains(err.Error(), "hashed names") {
			t.Fatalf("List with a prefix longer than any name: %v, want an error saying why", err)
		}
	})
}

func TestForceRelease(t *testing.T) {
	srv := testserver.StartMySQL(t)

	t.Run("OwnHolder", func(t *testing.T) {
		// Forced through the Backend that holds the lock, the user lock
		// goes at once: another Backend takes the key straight away.
		inspecttest.ForceOwnHolder(t, dial(t, srv), dial(t, srv))
	})
	t.Run("Free", func(t *testing.T) { inspecttest.ForceNeverLocked(t, dial(t, srv)) })
	t.Run("Cancelled", func(t *testing.T) { inspecttest.Cancelled(t, dial(t, srv)) })
}

package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/inspecttest"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestKindsForceRelease: before any kind was used, a kind's view reads
// every key as free without creating the kinds' table; then, through a
// Client, each kind's view removes every hold of its kind on a key by
// force: the holders' renewals fail, the returned floor is above their
// tokens and below the next one, and a waiting writer's claim stays.
func TestKindsForceRelease(t *testing.T) {
	srv := testserver.StartMySQL(t)
	ctx := testserver.Ctx(t, 2*time.Minute)
	b := dial(t, srv)
	read, write, err := turnstile.ReadWrite(b)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := turnstile.New(read)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Inspect(ctx, "k"); err != nil || st.Held {
		t.Fatalf("Inspect before any kind was used = %+v, %v; want free", st, err)
	}
	if sts, more, err := cl.List(ctx, "", 10); err != nil || len(sts) != 0 || more {
		t.Fatalf("List before any kind was used = %+v, %v, %v; want nothing", sts, more, err)
	}
	if _, ok, err := b.Acquire(ctx, "k", "plain", time.Minute); !ok || err != nil {
		t.Fatalf("plain lock: %v, %v", ok, err)
	}
	if st, err := cl.ForceRelease(ctx, "k"); err != nil || st.Held {
		t.Fatalf("ForceRelease before any kind was used = %+v, %v; want not held", st, err)
	}
	if n := mustExec(t, srv, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '"+mysqlproc.Database+"' AND table_name = 'turnstile_holds'"); n != "0" {
		t.Fatalf("the operator's calls created turnstile_holds (%s tables)", n)
	}

	const ttl = 10 * time.Second
	for _, k := range inspecttest.Kinds(t, b, read, write) {
		t.Run(k.Name, func(t *testing.T) {
			cl, err := turnstile.New(k.Inspect)
			if err != nil {
				t.Fatal(err)
			}
			inspecttest.ForceKind(t, ctx, cl, k, "kinds-force/"+k.Name, ttl, nil)
		})
	}

	t.Run("WriterClaimStays", func(t *testing.T) { inspecttest.WriterClaimStays(t, ctx, cl, read, write, ttl) })

	t.Run("Cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := cl.ForceRelease(cctx, "x"); err == nil {
			t.Fatal("ForceRelease with a cancelled context: no error")
		}
	})
}

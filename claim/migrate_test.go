package claim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/claim"
)

// Migrate is idempotent and safe from several sessions at once, on a
// database that has no tables yet.
func TestMigrateConcurrent(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	admin := pgPool(t, 1)
	for _, q := range []string{"DROP DATABASE IF EXISTS claim_migrate", "CREATE DATABASE claim_migrate"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := pgx.ParseConfig(pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "claim_migrate"
	conns := make([]*pgx.Conn, 4)
	for i := range conns {
		if conns[i], err = pgx.ConnectConfig(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conns[i].Close(context.Background()) }()
	}
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() { errs[i] = claim.Migrate(ctx, conn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate %d: %v", i, err)
		}
	}
	if err := claim.Migrate(ctx, conns[0]); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	db := mysqlDB(t, 4)
	for range 2 {
		if err := claim.MigrateMySQL(ctx, db); err != nil {
			t.Fatalf("MigrateMySQL again: %v", err)
		}
	}
}

func TestServerVersions(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"8.0.36", true},
		{"8.4.0-commercial", true},
		{"9.1.0", true},
		{"10.6.0-MariaDB", true},
		{"10.11.19-MariaDB-0+deb12u1", true},
		{"11.4.2-MariaDB-ubu2404", true},
		{"5.5.5-10.11.6-MariaDB", true},
		{"5.7.44-log", false},
		{"10.5.23-MariaDB", false},
		{"10.1.48-MariaDB-0+deb9u2", false},
		{"", false},
		{"mysql", false},
		{"x.y", false},
	} {
		err := claim.CheckServerVersion(tc.version)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v; want ok %v", tc.version, err, tc.ok)
		}
		if err != nil && !errors.Is(err, claim.ErrUnsupportedServer) {
			t.Errorf("%q: %v does not match ErrUnsupportedServer", tc.version, err)
		}
	}
}

// FuzzServerVersion: any version string gets an answer, never a panic,
// and a refusal matches ErrUnsupportedServer.
func FuzzServerVersion(f *testing.F) {
	for _, s := range []string{"8.0.36", "10.11.6-MariaDB", "5.5.5-10.6.0-MariaDB", "5.7.1", "", ".", "10.-1", "99999999999999999999.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if err := claim.CheckServerVersion(v); err != nil && !errors.Is(err, claim.ErrUnsupportedServer) {
			t.Fatalf("%q: %v", v, err)
		}
	})
}

package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/pgproc"

	_ "github.com/turnstilelock/turnstile/postgres" // registers postgres://
)

// postgresStore sets turnstile/postgres beside PostgreSQL's session
// advisory lock on one PostgreSQL server run as the test suite runs it
// (pgproc.Start): fsync, synchronous_commit and full_page_writes off, so
// that no commit waits for the disk. An advisory lock writes no WAL;
// turnstile's lock rows do.
var postgresStore = nativeStore{
	name:   "postgres",
	recipe: "PostgreSQL's pg_advisory_lock",
	libraries: func() []workload.Library {
		return []workload.Library{
			workload.TurnstileOn("postgres", "release notices over LISTEN/NOTIFY, one local line of waiters per key, the watchdog", postgresURL),
			peers.PostgresAdvisory("postgres", "postgres"),
		}
	},
	start: func(string) (nativeServer, error) {
		srv, err := pgproc.Start()
		if err != nil {
			return nativeServer{}, err
		}
		return processServer(srv.Addr(), srv.PID(), srv.Kill,
			"PostgreSQL "+postgresVersion(srv.Addr())+" (fsync=off, synchronous_commit=off, full_page_writes=off, max_connections=300, as the test suite runs it)",
			"PostgreSQL: no commit waits for the disk (fsync and synchronous_commit off); pg_advisory_lock writes no WAL, turnstile's lock rows do.",
		), nil
	},
}

// postgresURL is turnstile's URL of the server at addr that pgproc
// started: user and database postgres, trusted, without TLS.
func postgresURL(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
}

// postgresVersion asks the server at addr its version, for the report.
func postgresVersion(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, postgresURL(addr))
	if err != nil {
		return "(unknown version)"
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "(unknown version)"
	}
	return v
}

package claim

import (
	"context"
	"database/sql"
	_ "embed" // the SQL
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
)

var (
	//go:embed sql/mysql_coupons.sql
	mysqlCouponsSQL string
	//go:embed sql/mysql_jobs.sql
	mysqlJobsSQL string
)

// SQLQuerier runs SQL on MySQL or MariaDB: *sql.DB, *sql.Conn and *sql.Tx
// satisfy it.
type SQLQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// MigrateMySQL creates the tables turnstile_coupons and turnstile_jobs on
// MySQL or MariaDB if they are missing (sql/mysql_coupons.sql and
// sql/mysql_jobs.sql hold the statements). It is idempotent and safe to
// run from several processes at once. It refuses, with
// ErrUnsupportedServer, a server without FOR UPDATE SKIP LOCKED: MySQL
// before 8.0.1, MariaDB before 10.6.
func MigrateMySQL(ctx context.Context, db SQLQuerier) error {
	if db == nil {
		return fmt.Errorf("%w: nil SQL querier", turnstile.ErrInvalidOption)
	}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return fmt.Errorf("claim: read the server version: %w", err)
	}
	if err := checkServerVersion(version); err != nil {
		return err
	}
	for _, q := range []struct{ table, sql string }{{"turnstile_coupons", mysqlCouponsSQL}, {"turnstile_jobs", mysqlJobsSQL}} {
		if _, err := db.ExecContext(ctx, q.sql); err != nil {
			return fmt.Errorf("claim: create table %s: %w", q.table, err)
		}
	}
	return nil
}

// checkServerVersion refuses a MySQL or MariaDB version string (as
// VERSION() returns it: "8.0.36", "10.11.6-MariaDB-0+deb12u1") of a server
// without SKIP LOCKED.
func checkServerVersion(version string) error {
	v := strings.TrimPrefix(version, "5.5.5-") // MariaDB behind some proxies
	mariadb := strings.Contains(strings.ToLower(v), "mariadb")
	fields := strings.SplitN(v, ".", 3)
	if len(fields) < 2 {
		return fmt.Errorf("%w: cannot read server version %q", ErrUnsupportedServer, version)
	}
	major, err1 := strconv.Atoi(fields[0])
	minor, err2 := strconv.Atoi(strings.TrimRightFunc(fields[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return fmt.Errorf("%w: cannot read server version %q", ErrUnsupportedServer, version)
	}
	switch {
	case mariadb && (major < 10 || major == 10 && minor < 6):
		return fmt.Errorf("%w: MariaDB %d.%d has no SKIP LOCKED; 10.6 or later has", ErrUnsupportedServer, major, minor)
	case !mariadb && major < 8:
		return fmt.Errorf("%w: MySQL %d.%d has no SKIP LOCKED; 8.0 or later has", ErrUnsupportedServer, major, minor)
	}
	return nil
}

// epoch is the zero of the microsecond counts that the MySQL statements
// read and write: TIMESTAMPDIFF and TIMESTAMPADD against it give a
// DATETIME's UTC time whatever the session's time zone, and whether or not
// the driver parses times.
const epoch = "'1970-01-01 00:00:00'"

// micros is the SQL expression for column col (a UTC DATETIME) as
// microseconds since the epoch.
func micros(col string) string { return "TIMESTAMPDIFF(MICROSECOND, " + epoch + ", " + col + ")" }

// fromMicros is a time of a microsecond count read with micros.
func fromMicros(us sql.NullInt64) time.Time {
	if !us.Valid {
		return time.Time{}
	}
	return time.UnixMicro(us.Int64)
}

// repeatJoin is n copies of item separated by ", ": placeholders for
// IN (...) and rows for VALUES.
func repeatJoin(item string, n int) string {
	return strings.TrimSuffix(strings.Repeat(item+", ", n), ", ")
}

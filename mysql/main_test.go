package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile/internal/mysqlproc"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/mysql"
)

func TestMain(m *testing.M) {
	locktest.RunChild()
	testserver.Main(m)
}

// dial returns a backend of its own, closed when the test ends.
func dial(t testing.TB, srv *testserver.MySQL, opts ...mysql.Option) *mysql.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := mysql.Dial(ctx, config(srv), opts...)
	if err != nil {
		t.Fatalf("mysql.Dial: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func config(srv *testserver.MySQL) *gomysql.Config {
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", srv.Addr()
	cfg.User, cfg.Passwd, cfg.DBName = mysqlproc.User, mysqlproc.Password, mysqlproc.Database
	return cfg
}

// mustExec runs SQL as root on the test server and fails the test on error.
func mustExec(t testing.TB, srv *testserver.MySQL, sql string) string {
	t.Helper()
	out, err := srv.Exec(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// quote is a SQL string literal of s (lock names hold no quotes or
// backslashes in these tests, but be safe).
func quote(s string) string { return strconv.Quote(s) }

// evict ends key's lease behind its holder's back, as an operator would.
func evict(t testing.TB, srv *testserver.MySQL, key string) {
	mustExec(t, srv, fmt.Sprintf("UPDATE %s.turnstile_locks SET owner = '', expires_at = NOW(6) WHERE name = %s",
		mysqlproc.Database, quote(mysql.LockName(key))))
}

// connections counts the sessions of the test user.
func connections(t testing.TB, srv *testserver.MySQL) int {
	out := mustExec(t, srv, fmt.Sprintf("SELECT COUNT(*) FROM information_schema.processlist WHERE user = '%s'", mysqlproc.User))
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("processlist count %q: %v", out, err)
	}
	return n
}

// userLockSessions tells how many of the user locks names are held, and
// by how many sessions.
func userLockSessions(t testing.TB, srv *testserver.MySQL, names []string) (used, sessions int) {
	t.Helper()
	conn, err := gomysql.NewConnector(config(srv))
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ids := map[int64]bool{}
	for len(names) > 0 {
		n := min(len(names), 200)
		q := "SELECT IS_USED_LOCK(?)" + strings.Repeat(" UNION ALL SELECT IS_USED_LOCK(?)", n-1)
		args := make([]any, n)
		for i := range args {
			args[i] = names[i]
		}
		rows, err := db.Query(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id sql.NullInt64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			if id.Valid {
				used++
				ids[id.Int64] = true
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		names = names[n:]
	}
	return used, len(ids)
}

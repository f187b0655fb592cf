package main

import (
	"fmt"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/mysqlproc"

	_ "github.com/turnstilelock/turnstile/mysql" // registers mysql://
)

// mysqlStore sets turnstile/mysql beside the named user lock, GET_LOCK,
// on one MariaDB server (the MySQL server installed here) run as the test
// suite runs it (mysqlproc.Start): innodb_flush_log_at_trx_commit=2, the
// log written at every commit and flushed to disk once a second, no
// binary log. GET_LOCK writes nothing; turnstile's lock rows do.
var mysqlStore = nativeStore{
	name:   "mysql",
	recipe: "GET_LOCK on MariaDB",
	libraries: func() []workload.Library {
		return []workload.Library{
			workload.TurnstileOn("mysql", "GET_LOCK on 4 pinned connections and a row per lock, waiters polling on the backoff behind one local line per key, the watchdog", mysqlURL),
			peers.MySQLGetLock(mysqlproc.User, mysqlproc.Password, mysqlproc.Database),
		}
	},
	start: func(dir string) (nativeServer, error) {
		if !mysqlproc.Available() {
			return nativeServer{}, mysqlproc.ErrNotInstalled
		}
		srv, err := mysqlproc.Start(dir)
		if err != nil {
			return nativeServer{}, err
		}
		version, err := srv.Exec("SELECT VERSION()")
		if err != nil {
			version = "(unknown version)"
		}
		return processServer(srv.Addr(), srv.PID(), func() { srv.Kill(); srv.Remove() },
			"MariaDB "+version+" (innodb_flush_log_at_trx_commit=2, no binary log, a 16 MB buffer pool, as the test suite runs it)",
			"MariaDB: a commit writes its log but flushes it to disk once a second (innodb_flush_log_at_trx_commit=2); GET_LOCK writes nothing, turnstile's lock rows do.",
		), nil
	},
}

// mysqlURL is turnstile's URL of the server at addr that mysqlproc
// started, as the account it created.
func mysqlURL(addr string) string {
	return fmt.Sprintf("mysql://%s:%s@%s/%s", mysqlproc.User, mysqlproc.Password, addr, mysqlproc.Database)
}

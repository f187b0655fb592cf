package mysql_test

import (
	"fmt"
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/mysql"
)

// BenchmarkLockUnlock: 16 goroutines on one Backend acquire and release
// keys of their own; it reports pairs/s and the acquire latency
// percentiles, with the default and with 16 connections.
func BenchmarkLockUnlock(b *testing.B) {
	srv := testserver.StartMySQL(b)
	for _, conns := range []int{mysql.DefaultConns, 16} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			benchLockUnlock(b, dial(b, srv, mysql.WithConns(conns)))
		})
	}
}

func benchLockUnlock(b *testing.B, be *mysql.Backend) {
	c, err := turnstile.New(be)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	locktest.Pairs(b, 16, locktest.DistinctKeys(c))
}

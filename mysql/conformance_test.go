package mysql_test

import (
	"testing"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestConformance(t *testing.T) {
	srv := testserver.StartMySQL(t)
	locktest.Run(t, locktest.Harness{
		New:   func(t testing.TB) driver.Backend { return dial(t, srv) },
		URL:   srv.URL(),
		Evict: func(t testing.TB, key string) { evict(t, srv, key) },
	})
}

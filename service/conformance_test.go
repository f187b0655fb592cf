//go:build !race

package service_test

import (
	"testing"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
)

// TestConformanceInProcess runs the conformance suite through an
// instance in this process over the memory store: every case, a Client
// over turnstile://, the child processes of the multi-process cases
// through the same instance.
func TestConformanceInProcess(t *testing.T) {
	store := memory.New()
	in := startInstance(t, service.Config{Backend: store})
	url := "turnstile://" + in.addr
	locktest.Run(t, locktest.Harness{
		New:   func(t testing.TB) driver.Backend { return dial(t, url) },
		URL:   url,
		Evict: func(_ testing.TB, key string) { store.Evict(key) },
	})
}

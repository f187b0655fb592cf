package redlock_test

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
)

func TestMain(m *testing.M) {
	locktest.RunChild()
	testserver.Main(m, testserver.IgnoreGoroutines(testserver.IgnoreRueidisRefresh))
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

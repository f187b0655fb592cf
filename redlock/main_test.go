package redlock_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/locktest"
)

func TestMain(m *testing.M) {
	locktest.RunChild()
	goleak.VerifyTestMain(m,
		// When rueidis fails to dial it has already scheduled a
		// cluster-topology refresh that sleeps up to a second and then
		// ends; there is no client to close that could stop it.
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

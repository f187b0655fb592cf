package redis_test

import (
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/redis"
)

// The tests take the views of a Backend as callers do, through
// turnstile's functions of the kinds, as the views' own types.

func reentrantOf(t testing.TB, b *redis.Backend) *redis.Reentrant {
	return locktest.View[*redis.Reentrant](t)(turnstile.Reentrant(b))
}

func semaphoreOf(t testing.TB, b *redis.Backend, permits int) *redis.Semaphore {
	return locktest.View[*redis.Semaphore](t)(turnstile.Semaphore(b, permits))
}

func readWriteOf(t testing.TB, b *redis.Backend, opts ...turnstile.KindOption) (*redis.ReadLock, *redis.WriteLock) {
	return locktest.Sides[*redis.ReadLock, *redis.WriteLock](t)(turnstile.ReadWrite(b, opts...))
}

func fairOf(t testing.TB, b *redis.Backend, opts ...turnstile.KindOption) *redis.Fair {
	return locktest.View[*redis.Fair](t)(turnstile.Fair(b, opts...))
}

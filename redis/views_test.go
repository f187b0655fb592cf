package redis_test

import (
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/redis"
)

// The tests take the views of a Backend as callers do, through
// turnstile's functions of the kinds, and use the views' own types.

func reentrantOf(t testing.TB, b *redis.Backend) *redis.Reentrant {
	t.Helper()
	v, err := turnstile.Reentrant(b)
	if err != nil {
		t.Fatal(err)
	}
	return v.(*redis.Reentrant)
}

func semaphoreOf(t testing.TB, b *redis.Backend, permits int) *redis.Semaphore {
	t.Helper()
	v, err := turnstile.Semaphore(b, permits)
	if err != nil {
		t.Fatal(err)
	}
	return v.(*redis.Semaphore)
}

func readWriteOf(t testing.TB, b *redis.Backend, opts ...turnstile.KindOption) (*redis.ReadLock, *redis.WriteLock) {
	t.Helper()
	r, w, err := turnstile.ReadWrite(b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*redis.ReadLock), w.(*redis.WriteLock)
}

func fairOf(t testing.TB, b *redis.Backend, opts ...turnstile.KindOption) *redis.Fair {
	t.Helper()
	v, err := turnstile.Fair(b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v.(*redis.Fair)
}

package postgres_test

import (
	"testing"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/locktest"
)

// BenchmarkLockUnlock runs TryAcquire+Release pairs on distinct keys from
// 16 goroutines through one Client with the default 4 lock connections,
// and reports pairs/s and the acquire latency percentiles.
func BenchmarkLockUnlock(b *testing.B) {
	c, err := turnstile.New(dial(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	locktest.Pairs(b, 16, locktest.DistinctKeys(c))
}

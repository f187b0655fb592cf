package admission_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/turnstilelock/turnstile/admission"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// A limit no benchmark reaches (a burst of 2^30 on top of a million a
// second), so that every Admit is admitted and the Redis ones each make a
// round trip.
var open = admission.Limit{Rate: admission.MaxRate, Burst: 1 << 30}

// BenchmarkRedisAdmit: Admit on Redis, one key and one key per goroutine,
// from one goroutine and from many (run with -cpu to change how many).
func BenchmarkRedisAdmit(b *testing.B) {
	srv := testserver.StartRedis(b)
	a := newRedis(b, srv, open)
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if ok, _, err := a.Admit(ctx, "bench"); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("parallel/one-key", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, _, err := a.Admit(ctx, "bench"); !ok || err != nil {
					b.Error(ok, err)
					return
				}
			}
		})
	})
	b.Run("refused-by-pre-filter", func(b *testing.B) {
		tight := newRedis(b, srv, admission.Limit{Rate: 0.001, Burst: 1})
		key := fmt.Sprint("tight:", b.N)
		_, _, _ = tight.Admit(ctx, key)
		for b.Loop() {
			if ok, _, err := tight.Admit(ctx, key); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}

// BenchmarkLocalAdmit: Admit on a Local, one hot key and 1,000 keys, from
// one goroutine and from many.
func BenchmarkLocalAdmit(b *testing.B) {
	ctx := context.Background()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("key:", i)
	}
	l, err := admission.NewLocal(open)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if ok, _, err := l.Admit(ctx, "bench"); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("parallel/one-key", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, _, err := l.Admit(ctx, "bench"); !ok || err != nil {
					b.Error(ok, err)
					return
				}
			}
		})
	})
	b.Run("parallel/1000-keys", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if ok, _, err := l.Admit(ctx, keys[i%len(keys)]); !ok || err != nil {
					b.Error(ok, err)
					return
				}
				i++
			}
		})
	})
}

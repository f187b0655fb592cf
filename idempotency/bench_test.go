package idempotency_test

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkDo measures one Do per iteration, one goroutine: a first call
// (claim, run, store) and a replay (one read).
func BenchmarkDo(b *testing.B) {
	fn := func(context.Context) ([]byte, error) { return []byte("receipt-0001"), nil }
	for _, k := range kinds() {
		b.Run(k.name+"/first", func(b *testing.B) {
			s := k.open(b)
			ctx := context.Background()
			prefix := key(b, "")
			i := 0
			for b.Loop() {
				i++
				if _, _, err := s.Do(ctx, prefix+strconv.Itoa(i), fn); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(k.name+"/replay", func(b *testing.B) {
			s := k.open(b)
			ctx := context.Background()
			key := key(b, "")
			if _, _, err := s.Do(ctx, key, fn); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, rep, err := s.Do(ctx, key, fn); err != nil || !rep {
					b.Fatal(rep, err)
				}
			}
		})
	}
}

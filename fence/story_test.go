package fence_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/memory"
)

// TestGCPauseStory is the GC-pause incident with real leases: holder A's
// lease expires while A is paused; B acquires the lock (a larger token)
// and sells one item through the guard; A wakes and tries to sell with its old
// token, and the storage refuses it. The item is sold once.
func TestGCPauseStory(t *testing.T) {
	// sell writes "one item sold" through a guard under a token; stock
	// reads what is left.
	type store struct {
		sell  func(ctx context.Context, token uint64) error
		stock func(ctx context.Context) int
	}
	const resource = "lock:inventory:12345"
	stores := map[string]func(t *testing.T) store{
		"memory": func(t *testing.T) store {
			g, left := fence.NewMemory(), 10
			return store{
				sell: func(_ context.Context, token uint64) error {
					return g.Do(resource, token, func() error { left--; return nil })
				},
				stock: func(context.Context) int { return left },
			}
		},
		"postgres": func(t *testing.T) store {
			p, g, table := pool(t), newPostgres(t), "biz_story"
			businessTable(t, p, table, resource)
			return store{
				sell: func(ctx context.Context, token uint64) error {
					return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
						// The paused holder wrote before checking: the
						// check still undoes it.
						if err := sell(ctx, tx, table, token); err != nil {
							return err
						}
						return g.Check(ctx, tx, resource, token)
					})
				},
				stock: func(context.Context) int { stock, _ := row(t, p, table); return stock },
			}
		},
		"redis": func(t *testing.T) store {
			c, srv := rueidisClient(t)
			g, key := newRedis(t, c), fence.DataKey(resource, "stock")
			srv.MustDo(t, "SET", key, "10")
			return store{
				sell: func(ctx context.Context, token uint64) error {
					_, err := g.IncrBy(ctx, resource, token, key, -1)
					return err
				},
				stock: func(context.Context) int {
					n, err := strconv.Atoi(srv.MustDo(t, "GET", key))
					if err != nil {
						t.Fatal(err)
					}
					return n
				},
			}
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			s := newStore(t)
			b := memory.New()
			clientA := client(t, b, turnstile.WithTTL(turnstile.MinTTL), turnstile.WithoutWatchdog())
			clientB := client(t, b)

			a, err := clientA.Acquire(ctx, resource)
			if err != nil {
				t.Fatal(err)
			}
			// A pauses (GC, VM stall) past its TTL: its lease is lost.
			<-a.Context().Done()
			if cause := context.Cause(a.Context()); !errors.Is(cause, turnstile.ErrLockLost) {
				t.Fatalf("A's lease ended with %v, want ErrLockLost", cause)
			}

			// B acquires as soon as the store lets the lock go, and sells.
			l, err := clientB.Acquire(ctx, resource)
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			defer func() { _ = l.Release(ctx) }()
			if l.Token() <= a.Token() {
				t.Fatalf("B's token %d is not greater than A's %d", l.Token(), a.Token())
			}
			if err := s.sell(ctx, l.Token()); err != nil {
				t.Fatalf("B sells: %v", err)
			}

			// A wakes and sells with its old token: refused.
			wantStale(t, s.sell(ctx, a.Token()), resource, a.Token(), l.Token())
			if got := s.stock(ctx); got != 9 {
				t.Fatalf("stock %d, want 9: the item was sold %d times", got, 10-got)
			}
		})
	}
}

func client(t testing.TB, b *memory.Backend, opts ...turnstile.Option) *turnstile.Client {
	t.Helper()
	c, err := turnstile.New(b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

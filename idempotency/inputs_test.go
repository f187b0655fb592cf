package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/idempotency"
)

func ok(context.Context) ([]byte, error) { return []byte("ok"), nil }

func TestBadInput(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		s := k.open(t)
		ctx := ctxFor(t, 10*time.Second)
		var runs int
		count := func(context.Context) ([]byte, error) { runs++; return nil, nil }
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		for _, tc := range []struct {
			name string
			ctx  context.Context
			key  string
			fn   func(context.Context) ([]byte, error)
			want error
		}{
			{"empty key", ctx, "", count, turnstile.ErrInvalidKey},
			{"long key", ctx, strings.Repeat("k", idempotency.MaxKeyLen+1), count, turnstile.ErrInvalidKey},
			{"nil fn", ctx, "k", nil, idempotency.ErrNilFunc},
			{"cancelled", cancelled, key(t, "c"), count, context.Canceled},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r, rep, err := s.Do(tc.ctx, tc.key, tc.fn)
				if !errors.Is(err, tc.want) || r != nil || rep {
					t.Errorf("Do = (%q, %v, %v), want %v", r, rep, err, tc.want)
				}
			})
		}
		if runs != 0 {
			t.Errorf("fn ran %d times on bad input", runs)
		}
		// The longest key works.
		if _, _, err := s.Do(ctx, strings.Repeat("k", idempotency.MaxKeyLen-len(t.Name()))+t.Name(), ok); err != nil {
			t.Errorf("Do with a %d-byte key: %v", idempotency.MaxKeyLen, err)
		}
	})
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  idempotency.Option
	}{
		{"zero retention", idempotency.WithRetention(0)},
		{"sub-millisecond retention", idempotency.WithRetention(time.Microsecond)},
		{"negative wait", idempotency.WithWait(-time.Second)},
		{"zero claim ttl", idempotency.WithClaimTTL(0)},
		{"short claim ttl", idempotency.WithClaimTTL(idempotency.MinClaimTTL - 1)},
		{"nil option", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := idempotency.NewRedis(newRueidis(t), tc.opt); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Errorf("NewRedis: %v, want ErrInvalidOption", err)
			}
			if _, err := idempotency.NewPostgres(newPool(t), tc.opt); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Errorf("NewPostgres: %v, want ErrInvalidOption", err)
			}
			ran := false
			_, _, err := idempotency.NewMemory(tc.opt).Do(ctxFor(t, time.Second), "k", func(context.Context) ([]byte, error) {
				ran = true
				return nil, nil
			})
			if !errors.Is(err, turnstile.ErrInvalidOption) || ran {
				t.Errorf("NewMemory(...).Do: %v (ran=%v), want ErrInvalidOption", err, ran)
			}
			_, _, err = idempotency.NewMemory().With(tc.opt).Do(ctxFor(t, time.Second), "k", ok)
			if !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Errorf("Memory.With(...).Do: %v, want ErrInvalidOption", err)
			}
		})
	}
}

func TestNilClients(t *testing.T) {
	if _, err := idempotency.NewRedis(nil); !errors.Is(err, idempotency.ErrNilClient) {
		t.Errorf("NewRedis(nil): %v, want ErrNilClient", err)
	}
	if _, err := idempotency.NewPostgres(nil); !errors.Is(err, idempotency.ErrNilClient) {
		t.Errorf("NewPostgres(nil): %v, want ErrNilClient", err)
	}
	if err := idempotency.Migrate(context.Background(), nil); !errors.Is(err, idempotency.ErrNilClient) {
		t.Errorf("Migrate(nil): %v, want ErrNilClient", err)
	}
}

func TestPostgresKeyEncoding(t *testing.T) {
	s, err := idempotency.NewPostgres(newPool(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a\x00b", "\xff\xfe"} {
		if _, _, err := s.Do(ctxFor(t, 10*time.Second), key, ok); !errors.Is(err, turnstile.ErrInvalidKey) {
			t.Errorf("Do(%q): %v, want ErrInvalidKey", key, err)
		}
	}
}

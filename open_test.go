package turnstile_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/memory"
)

// TestOpenConfigTTL: a backend opened from its URL is told the Client's
// TTL — WithTTL's, else DefaultTTL — and options that cannot
// work are refused before it is called.
func TestOpenConfigTTL(t *testing.T) {
	var got []time.Duration
	turnstile.Register("openconfig-test", func(_ context.Context, _ *url.URL, cfg driver.OpenConfig) (driver.Backend, error) {
		got = append(got, cfg.TTL)
		return memory.New(), nil
	})
	for _, opts := range [][]turnstile.Option{nil, {turnstile.WithTTL(3 * time.Second)}} {
		c, err := turnstile.Open(context.Background(), "openconfig-test://", opts...)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	if len(got) != 2 || got[0] != turnstile.DefaultTTL || got[1] != 3*time.Second {
		t.Fatalf("the backend was told TTLs %v, want [%v 3s]", got, turnstile.DefaultTTL)
	}

	_, err := turnstile.Open(context.Background(), "openconfig-test://", turnstile.WithTTL(time.Millisecond))
	if !errors.Is(err, turnstile.ErrInvalidTTL) {
		t.Fatalf("Open with a 1ms TTL = %v, want ErrInvalidTTL", err)
	}
	if len(got) != 2 {
		t.Fatal("the backend was opened for a Client whose options are refused")
	}
}

// TestRegisterTwice: a scheme taken cannot be taken again (mem:// is
// built in).
func TestRegisterTwice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Register of the mem scheme did not panic")
		}
	}()
	turnstile.Register("mem", func(context.Context, *url.URL, driver.OpenConfig) (driver.Backend, error) {
		return memory.New(), nil
	})
}

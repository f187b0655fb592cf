package admission_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/admission"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestBadInput: every bad argument is an error at once, matching its
// sentinel, for both admissions.
func TestBadInput(t *testing.T) {
	srv := testserver.StartRedis(t)
	client := newClient(t, srv.Addr())
	good := admission.Limit{Rate: 1000, Burst: 20}

	limits := []struct {
		name  string
		limit admission.Limit
	}{
		{"zero rate", admission.Limit{Rate: 0, Burst: 1}},
		{"negative rate", admission.Limit{Rate: -1, Burst: 1}},
		{"NaN rate", admission.Limit{Rate: math.NaN(), Burst: 1}},
		{"infinite rate", admission.Limit{Rate: math.Inf(1), Burst: 1}},
		{"rate above MaxRate", admission.Limit{Rate: admission.MaxRate * 2, Burst: 1}},
		{"zero burst", admission.Limit{Rate: 1, Burst: 0}},
		{"negative burst", admission.Limit{Rate: 1, Burst: -3}},
		{"refill longer than MaxWindow", admission.Limit{Rate: 1e-9, Burst: 1}},
		{"zero limit", admission.Limit{}},
	}
	for _, tc := range limits {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := admission.NewRedis(client, tc.limit); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Errorf("NewRedis: %v, want ErrInvalidOption", err)
			}
			if _, err := admission.NewLocal(tc.limit); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Errorf("NewLocal: %v, want ErrInvalidOption", err)
			}
		})
	}

	// The edges of the bounds are accepted.
	for _, l := range []admission.Limit{
		{Rate: admission.MaxRate, Burst: 1},
		{Rate: 1, Burst: int(admission.MaxWindow / time.Second)},
	} {
		if _, err := admission.NewRedis(client, l); err != nil {
			t.Errorf("NewRedis(%+v): %v", l, err)
		}
	}

	options := []struct {
		name string
		opt  admission.Option
	}{
		{"nil option", nil},
		{"zero max keys", admission.WithMaxKeys(0)},
		{"negative max keys", admission.WithMaxKeys(-1)},
		{"prefix with a brace", admission.WithPrefix("app{")},
		{"prefix with a closing brace", admission.WithPrefix("}app:")},
		{"over-long prefix", admission.WithPrefix(strings.Repeat("p", turnstile.MaxKeyLen+1))},
	}
	for _, tc := range options {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := admission.NewRedis(client, good, tc.opt); !errors.Is(err, turnstile.ErrInvalidOption) {
				t.Errorf("NewRedis: %v, want ErrInvalidOption", err)
			}
		})
	}
	if _, err := admission.NewRedis(nil, good); !errors.Is(err, turnstile.ErrInvalidOption) {
		t.Errorf("nil client: %v, want ErrInvalidOption", err)
	}
	for _, opt := range []admission.Option{admission.WithPrefix("app:"), admission.WithoutPreFilter()} {
		if _, err := admission.NewLocal(good, opt); !errors.Is(err, turnstile.ErrInvalidOption) {
			t.Errorf("NewLocal with a Redis-only option: %v, want ErrInvalidOption", err)
		}
	}

	r, err := admission.NewRedis(client, good)
	if err != nil {
		t.Fatal(err)
	}
	l, err := admission.NewLocal(good)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []struct {
		name string
		ctx  context.Context
		key  string
		want error
	}{
		{"empty key", context.Background(), "", turnstile.ErrInvalidKey},
		{"over-long key", context.Background(), strings.Repeat("k", turnstile.MaxKeyLen+1), turnstile.ErrInvalidKey},
		{"nil context", nil, "k", turnstile.ErrInvalidOption},
		{"cancelled context", cancelled, "k", context.Canceled},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			for name, a := range map[string]turnstile.Admission{"redis": r, "local": l} {
				ok, _, err := a.Admit(tc.ctx, tc.key)
				if ok || !errors.Is(err, tc.want) {
					t.Errorf("%s: Admit = %v, %v; want false, %v", name, ok, err, tc.want)
				}
			}
		})
	}
	if n := srv.MustDo(t, "DBSIZE"); n != "0" {
		t.Errorf("bad calls wrote %s keys to Redis, want none", n)
	}
	if n := l.Len(); n != 0 {
		t.Errorf("bad calls made Local track %d keys, want none", n)
	}
}

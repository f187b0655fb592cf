package storeurl_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// store is a backend whose Dial fails for an empty address.
type store struct{ addr string }

func (*store) Acquire(context.Context, string, string, time.Duration) (uint64, bool, error) {
	return 0, false, nil
}
func (*store) Extend(context.Context, string, string, time.Duration) (bool, error) { return false, nil }
func (*store) Release(context.Context, string, string) (bool, error)               { return false, nil }

func dialStore(_ context.Context, addr string, opts ...int) (*store, error) {
	if addr == "" {
		return nil, errors.New("no address")
	}
	return &store{addr: addr}, nil
}

func parseStore(u *url.URL) (string, []int, error) {
	if u.Host == "bad" {
		return "", nil, errors.New("bad host")
	}
	return u.Host, nil, nil
}

// TestOpener: the opener dials what the parser read, and returns a nil
// Backend (not a nil *store in a Backend) with the parser's or the
// dialler's error.
func TestOpener(t *testing.T) {
	open := storeurl.Opener(parseStore, dialStore)
	b, err := open(context.Background(), &url.URL{Host: "h:1"}, driver.OpenConfig{})
	if s, ok := b.(*store); err != nil || !ok || s.addr != "h:1" {
		t.Fatalf("open = %v, %v", b, err)
	}
	for _, host := range []string{"bad", ""} {
		b, err := open(context.Background(), &url.URL{Host: host}, driver.OpenConfig{})
		if err == nil || b != driver.Backend(nil) {
			t.Fatalf("host %q: open = %#v, %v; want nil and an error", host, b, err)
		}
	}
}

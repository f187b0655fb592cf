package service_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/service"
	"github.com/turnstilelock/turnstile/service/remote"
)

func TestMain(m *testing.M) {
	locktest.RunChild()
	runHoldChild()
	testserver.Main(m,
		turnstileCmd.Shared(),
		testserver.IgnoreGoroutines(testserver.IgnoreRueidisRefresh,
			// The partition tests' proxy (toxiproxy) can leave a toxic's
			// pipe blocked on a channel of a link it stopped: the proxy's,
			// not turnstile's.
			goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run")))
}

var ctxFor = testserver.Ctx

// instance is an instance of the service run in the test's process.
type instance struct {
	*service.Server
	addr string
	stop func() // drains it and waits until it is done
}

// startInstance serves cfg on a free loopback port until the test ends.
func startInstance(t testing.TB, cfg service.Config, opts ...func(*service.ServeOptions)) *instance {
	t.Helper()
	s, err := service.New(cfg)
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	ln, err := service.Listen(context.Background(), "127.0.0.1:0", service.DefaultKeepAlive)
	if err != nil {
		t.Fatal(err)
	}
	var so service.ServeOptions
	so.DrainTimeout = 5 * time.Second
	for _, o := range opts {
		o(&so)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, so) }()
	in := &instance{Server: s, addr: ln.Addr().String()}
	var stopped bool
	in.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
		_ = s.Close()
	}
	t.Cleanup(in.stop)
	return in
}

// dial returns the turnstile:// backend of url, closed when the test
// ends.
func dial(t testing.TB, url string) driver.Backend {
	t.Helper()
	b, err := openBackend(ctxFor(t, 10*time.Second), url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = b.(interface{ Close() error }).Close() })
	return b
}

func openBackend(ctx context.Context, raw string) (driver.Backend, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	cfg, err := remote.ParseURL(u)
	if err != nil {
		return nil, err
	}
	return remote.Dial(ctx, cfg)
}

// errNotYet is what a condition polled for returns until it holds.
var errNotYet = errors.New("not yet")

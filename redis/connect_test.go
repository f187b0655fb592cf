package redis_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestOpenDatabaseOutOfRange: a database number the server does not have
// is a mistake in the URL, not an unreachable store, and the error says
// which server and which database.
func TestOpenDatabaseOutOfRange(t *testing.T) {
	srv := testserver.StartRedis(t) // 16 databases: 0 to 15
	c, err := turnstile.Open(ctxFor(t, 10*time.Second), srv.URL()+"/99")
	if err == nil {
		_ = c.Close()
		t.Fatal("Open of database 99 on a server with 16 succeeded")
	}
	if !errors.Is(err, turnstile.ErrInvalidURL) {
		t.Errorf("error does not match ErrInvalidURL: %v", err)
	}
	for _, want := range []string{srv.Addr(), "no database 99"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	// The last database is there.
	c, err = turnstile.Open(ctxFor(t, 10*time.Second), srv.URL()+"/15")
	if err != nil {
		t.Fatalf("Open of database 15: %v", err)
	}
	_ = c.Close()
}

// TestOpenNotRedis: a server that answers in another protocol is named,
// and said not to speak Redis, instead of an opaque RESP parse error.
func TestOpenNotRedis(t *testing.T) {
	addr := testserver.Raw(t, "<html><body>hello</body></html>\r\n")
	c, err := turnstile.Open(ctxFor(t, 10*time.Second), "redis://"+addr+"?dial_timeout=2s")
	if err == nil {
		_ = c.Close()
		t.Fatal("Open of an HTML server succeeded")
	}
	for _, want := range []string{addr, "does not speak the Redis protocol"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if errors.Is(err, turnstile.ErrInvalidURL) {
		t.Errorf("a server of another kind is not a malformed URL: %v", err)
	}
}

// TestOpenErrorsNameTheAddress: a refused connection names the address
// tried, also when the URL leaves it to the defaults.
func TestOpenErrorsNameTheAddress(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	_ = closed.Close()
	_, err = turnstile.Open(ctxFor(t, 10*time.Second), "redis://"+refused)
	if err == nil || !strings.Contains(err.Error(), "redis: connect to "+refused+":") {
		t.Errorf("Open of a closed port: %v; want it to name %s", err, refused)
	}

	// "redis://" alone means localhost:6379; the error must say so.
	c, err := turnstile.Open(ctxFor(t, 10*time.Second), "redis://?dial_timeout=1s")
	if err == nil {
		_ = c.Close() // a server on the default port: nothing to name
		return
	}
	if !strings.Contains(err.Error(), "localhost:6379") {
		t.Errorf("Open(redis://): %v; want it to name localhost:6379", err)
	}
}

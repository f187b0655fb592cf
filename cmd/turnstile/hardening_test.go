//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestRunWaitBoundsConnecting: --wait bounds the whole wait, connecting
// included. A store that accepts connections and never answers used to
// hold turnstile for the 5 s dial timeout whatever --wait said.
func TestRunWaitBoundsConnecting(t *testing.T) {
	t.Parallel()
	addr := testserver.Raw(t, "")
	const wait = time.Second
	r := runTurnstile(t, nil, "run", "--backend", "redis://"+addr, "--key", "k", "--wait", wait.String(), "--", "true")
	if r.code != exitUnavailable {
		t.Errorf("exit code %d, want %d (store unavailable); stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
	for _, want := range []string{"no answer within --wait 1s", addr} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	// The dial timeout is 5 s. The margin covers starting a -race binary
	// on a loaded machine; the message above already shows that --wait,
	// not the dial timeout, ended the wait.
	if limit := wait + 2500*time.Millisecond; r.elapsed > limit {
		t.Errorf("turnstile ran %v with --wait %v against a silent store, want under %v", r.elapsed, wait, limit)
	}
}

// TestMetricsAddrUnusable: an address in use, or not this host's, is a
// usage error (64), said once, for turnstile run and turnstile demo.
func TestMetricsAddrUnusable(t *testing.T) {
	t.Parallel()
	busy := testserver.Raw(t, "") // something listens there already
	for _, tc := range []struct {
		name, addr, want string
	}{
		{"in use", busy, "address already in use"},
		{"not this host's", "192.0.2.1:9100", "cannot assign requested address"},
	} {
		for _, args := range [][]string{
			{"run", "--backend", "mem://", "--key", "k", "--metrics-addr", tc.addr, "--", "true"},
			{"demo", "flash-sale", "--in-process", "--units", "10", "--orders", "20", "--metrics-addr", tc.addr},
		} {
			r := runTurnstile(t, nil, args...)
			if r.code != exitUsage {
				t.Errorf("%s %s: exit code %d, want %d; stderr:\n%s", args[0], tc.name, r.code, exitUsage, r.stderr)
			}
			for _, want := range []string{"--metrics-addr", tc.addr, tc.want, "for usage"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%s %s: stderr does not say %q:\n%s", args[0], tc.name, want, r.stderr)
				}
			}
			if n := strings.Count(r.stderr, "metrics:"); n > 1 {
				t.Errorf("%s %s: \"metrics:\" said %d times:\n%s", args[0], tc.name, n, r.stderr)
			}
		}
	}
}

// TestRunTTLBelowFloor: a TTL the watchdog could not keep alive on a busy
// host is refused before anything starts, with the reason.
func TestRunTTLBelowFloor(t *testing.T) {
	t.Parallel()
	for _, ttl := range []string{"1ms", "40ms", "199ms"} {
		r := runTurnstile(t, nil, "run", "--backend", "mem://", "--key", "k", "--ttl", ttl, "--", "true")
		if r.code != exitUsage {
			t.Errorf("--ttl %s: exit code %d, want %d; stderr:\n%s", ttl, r.code, exitUsage, r.stderr)
		}
		for _, want := range []string{"--ttl " + ttl, "200ms", "busy host"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("--ttl %s: stderr does not say %q:\n%s", ttl, want, r.stderr)
			}
		}
	}
	if r := runTurnstile(t, nil, "run", "--backend", "mem://", "--key", "k", "--ttl", "200ms", "--", "true"); r.code != 0 {
		t.Errorf("--ttl 200ms: exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
}

// TestRunRedisURLMistakes: a database the server does not have is a usage
// error naming it; a server that is not Redis is said to be one.
func TestRunRedisURLMistakes(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	r := runTurnstile(t, nil, "run", "--backend", srv.URL()+"/99", "--key", "k", "--", "true")
	if r.code != exitUsage {
		t.Errorf("database 99: exit code %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
	}
	for _, want := range []string{srv.Addr(), "no database 99"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("database 99: stderr does not say %q:\n%s", want, r.stderr)
		}
	}

	html := testserver.Raw(t, "<html><body>hello</body></html>\r\n")
	r = runTurnstile(t, nil, "run", "--backend", "redis://"+html, "--key", "k", "--", "true")
	if r.code != exitUnavailable {
		t.Errorf("HTML server: exit code %d, want %d; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}
	for _, want := range []string{html, "does not speak the Redis protocol"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("HTML server: stderr does not say %q:\n%s", want, r.stderr)
		}
	}
}

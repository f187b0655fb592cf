package service_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/testcerts"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// tokens makes a tokens file of the given lines' tokens: name → role,
// prefixes (and extra fields), and returns the set and the bearer
// values by name.
func tokens(t *testing.T, specs map[string]string) (*service.TokenSet, map[string]string) {
	t.Helper()
	var file strings.Builder
	bearers := map[string]string{}
	for name, spec := range specs {
		fields := strings.Fields(spec)
		var prefixes, extra []string
		for _, f := range fields[1:] {
			if strings.Contains(f, "=") {
				extra = append(extra, f)
			} else {
				prefixes = append(prefixes, f)
			}
		}
		bearer, line, err := service.NewToken(name, fields[0], prefixes)
		if err != nil {
			t.Fatal(err)
		}
		bearers[name] = bearer
		file.WriteString(line + " " + strings.Join(extra, " ") + "\n")
	}
	ts, err := service.ParseTokens(strings.NewReader(file.String()))
	if err != nil {
		t.Fatalf("ParseTokens: %v\n%s", err, file.String())
	}
	return ts, bearers
}

// syncBuffer is a log that goroutines write together.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func wantReason(t *testing.T, what string, err error, code connect.Code, reason string) {
	t.Helper()
	if connect.CodeOf(err) != code || apierr.Reason(err) != reason {
		t.Fatalf("%s: %v (code %v, reason %q); want %v, %s", what, err, connect.CodeOf(err), apierr.Reason(err), code, reason)
	}
}

// TestTenants: each token reaches its own prefixes only — it can
// neither take, see, list, watch nor release another tenant's locks —
// within its role, and within its rate; no call without a valid token;
// and the log never shows a secret.
func TestTenants(t *testing.T) {
	ts, bearer := tokens(t, map[string]string{
		"alpha":  "lock a:",
		"beta":   "lock b:",
		"reader": "read a:",
		"ops":    "admin *",
		"slow":   "lock s: rate=1 burst=2",
	})
	var log syncBuffer
	in := startInstance(t, service.Config{Backend: memory.New(), Tokens: ts, Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	alpha, beta := clientsOf(t, in.addr, withToken(bearer["alpha"])), clientsOf(t, in.addr, withToken(bearer["beta"]))
	reader, ops := clientsOf(t, in.addr, withToken(bearer["reader"])), clientsOf(t, in.addr, withToken(bearer["ops"]))
	ctx := ctxFor(t, 30*time.Second)
	acquire := func(c apiClients, key string) (*v1.Lease, error) {
		r, err := c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: key}))
		if err != nil {
			return nil, err
		}
		return r.Msg.Lease, nil
	}

	_, err := acquire(clientsOf(t, in.addr), "a:1")
	wantReason(t, "no token", err, connect.CodeUnauthenticated, "NO_TOKEN")
	name, _, _ := strings.Cut(bearer["alpha"], ".")
	_, err = acquire(clientsOf(t, in.addr, withToken(name+".wrong")), "a:1")
	wantReason(t, "a wrong secret", err, connect.CodeUnauthenticated, "NO_TOKEN")

	la, err := acquire(alpha, "a:1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = acquire(alpha, "b:1")
	wantReason(t, "alpha takes beta's key", err, connect.CodePermissionDenied, "KEY_NOT_ALLOWED")
	_, err = beta.locks.Release(ctx, connect.NewRequest(&v1.ReleaseRequest{Lease: la}))
	wantReason(t, "beta releases alpha's lease", err, connect.CodePermissionDenied, "KEY_NOT_ALLOWED")
	_, err = beta.locks.Extend(ctx, connect.NewRequest(&v1.ExtendRequest{Lease: la}))
	wantReason(t, "beta extends alpha's lease", err, connect.CodePermissionDenied, "KEY_NOT_ALLOWED")
	_, err = beta.locks.Status(ctx, connect.NewRequest(&v1.StatusRequest{Key: "a:1"}))
	wantReason(t, "beta looks at alpha's key", err, connect.CodePermissionDenied, "KEY_NOT_ALLOWED")
	_, err = beta.locks.List(ctx, connect.NewRequest(&v1.ListRequest{Prefix: "a:"}))
	wantReason(t, "beta lists alpha's prefix", err, connect.CodePermissionDenied, "KEY_NOT_ALLOWED")
	lb, err := acquire(beta, "b:1")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := beta.locks.List(ctx, connect.NewRequest(&v1.ListRequest{}))
	if err != nil || len(ls.Msg.Locks) != 1 || ls.Msg.Locks[0].Key != "b:1" {
		t.Fatalf("beta's List of its own prefix = %v, %v; want b:1 alone", ls, err)
	}
	w, err := beta.locks.Watch(ctx, connect.NewRequest(&v1.WatchRequest{Key: "", Prefix: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Receive() || w.Msg().GetWatching() == nil {
		t.Fatalf("beta's watch of its prefix: %v", w.Err())
	}
	aw, err := beta.locks.Watch(ctx, connect.NewRequest(&v1.WatchRequest{Key: "a:", Prefix: true}))
	if err == nil {
		for aw.Receive() {
		}
		err = aw.Err()
	}
	wantReason(t, "beta watches alpha's prefix", err, connect.CodePermissionDenied, "KEY_NOT_ALLOWED")
	_, err = beta.elections.Leader(ctx, connect.NewRequest(&v1.LeaderRequest{Name: "a:election"}))
	wantReason(t, "beta asks alpha's election", err, connect.CodePermissionDenied, "KEY_NOT_ALLOWED")

	// Roles.
	if _, err := reader.locks.Status(ctx, connect.NewRequest(&v1.StatusRequest{Key: "a:1"})); err != nil {
		t.Fatalf("reader's Status: %v", err)
	}
	_, err = acquire(reader, "a:2")
	wantReason(t, "reader takes a lock", err, connect.CodePermissionDenied, "ROLE_NOT_ALLOWED")
	_, err = alpha.locks.ForceRelease(ctx, connect.NewRequest(&v1.ForceReleaseRequest{Key: "a:1"}))
	wantReason(t, "alpha forces a release", err, connect.CodePermissionDenied, "ROLE_NOT_ALLOWED")
	if r, err := ops.locks.ForceRelease(ctx, connect.NewRequest(&v1.ForceReleaseRequest{Key: "a:1"})); err != nil || !r.Msg.Removed.Held {
		t.Fatalf("ops's ForceRelease: %v, %v", r, err)
	}
	// beta's watch saw its own events and none of alpha's.
	if _, err := beta.locks.Release(ctx, connect.NewRequest(&v1.ReleaseRequest{Lease: lb})); err != nil {
		t.Fatal(err)
	}
	if !w.Receive() || w.Msg().GetEvent().GetKey() != "b:1" || w.Msg().GetEvent().GetType() != v1.EventType_EVENT_TYPE_RELEASED {
		t.Fatalf("beta's watch: %v %v; want the release of b:1 and nothing of a:", w.Msg(), w.Err())
	}

	// Rate: a burst of 2, then refused.
	slow := clientsOf(t, in.addr, withToken(bearer["slow"]))
	for i := range 2 {
		if _, err := slow.locks.Status(ctx, connect.NewRequest(&v1.StatusRequest{Key: "s:1"})); err != nil {
			t.Fatalf("call %d within the burst: %v", i+1, err)
		}
	}
	_, err = slow.locks.Status(ctx, connect.NewRequest(&v1.StatusRequest{Key: "s:1"}))
	wantReason(t, "a call over the rate", err, connect.CodeResourceExhausted, "RATE_LIMITED")

	for n, b := range bearer {
		_, secret, _ := strings.Cut(b, ".")
		if strings.Contains(log.String(), secret) {
			t.Fatalf("the log shows %s's secret", n)
		}
	}
}

// TestRemoteWithToken: a Client over turnstile://name:secret@ works
// within the token's prefixes; outside them, and with a wrong token, it
// gets turnstile.ErrPermission, which Acquire does not retry.
func TestRemoteWithToken(t *testing.T) {
	ts, bearer := tokens(t, map[string]string{"alpha": "lock a:"})
	in := startInstance(t, service.Config{Backend: memory.New(), Tokens: ts})
	name, secret, _ := strings.Cut(bearer["alpha"], ".")
	c, err := turnstile.New(dial(t, "turnstile://"+name+":"+secret+"@"+in.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxFor(t, 30*time.Second)
	l, err := c.Acquire(ctx, "a:job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "b:job"); !errors.Is(err, turnstile.ErrPermission) {
		t.Fatalf("Acquire outside the prefix: %v, want ErrPermission", err)
	}
	if _, err := openBackend(ctx, "turnstile://"+name+":wrong@"+in.addr); !errors.Is(err, turnstile.ErrPermission) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("open with a wrong secret: %v, want ErrPermission, and the secret not shown", err)
	}
}

// TestTLS: an instance with TLS and client certificates serves a
// turnstiles:// client that has a certificate its authority signed, and
// refuses one without.
func TestTLS(t *testing.T) {
	certs := testcerts.New(t)
	tlsCfg, _, err := service.ServerTLS(service.TLSFiles{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, ClientCAFile: certs.CA})
	if err != nil {
		t.Fatal(err)
	}
	in := startInstance(t, service.Config{Backend: memory.New()}, func(o *service.ServeOptions) { o.TLS = tlsCfg })
	ctx := ctxFor(t, 30*time.Second)
	url := "turnstiles://" + in.addr + "?ca_file=" + certs.CA
	c, err := turnstile.New(dial(t, url+"&cert_file="+certs.ClientCert+"&key_file="+certs.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryAcquire(ctx, "tls:key")
	if err != nil {
		t.Fatalf("over TLS with a client certificate: %v", err)
	}
	_ = l.Release(ctx)
	if _, err := openBackend(ctx, url); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if _, err := openBackend(ctx, "turnstiles://"+in.addr+"?ca_file="+certs.OtherCA+"&cert_file="+certs.ClientCert+"&key_file="+certs.ClientKey); err == nil {
		t.Fatal("a client that trusts another authority accepted the instance's certificate")
	}
	if _, err := openBackend(ctx, "turnstile://"+in.addr); err == nil {
		t.Fatal("a client without TLS was served by a TLS instance")
	}
}

// TestExposure: an instance refuses to serve an address other hosts can
// reach with neither TLS nor tokens, unless told --insecure.
func TestExposure(t *testing.T) {
	for _, c := range []struct {
		addr                  string
		tls, tokens, insecure bool
		wantRefused           bool
	}{
		{"127.0.0.1:7070", false, false, false, false},
		{"[::1]:7070", false, false, false, false},
		{"localhost:7070", false, false, false, false},
		{":7070", false, false, false, true},
		{"0.0.0.0:7070", false, false, false, true},
		{"10.0.0.5:7070", false, false, false, true},
		{"10.0.0.5:7070", true, false, false, false},
		{"10.0.0.5:7070", false, true, false, false},
		{"10.0.0.5:7070", false, false, true, false},
	} {
		err := service.CheckExposure(c.addr, c.tls, c.tokens, c.insecure)
		if refused := errors.Is(err, service.ErrExposed); refused != c.wantRefused {
			t.Errorf("CheckExposure(%+v) = %v, want refused %v", c, err, c.wantRefused)
		}
	}
	if err := service.CheckExposure("7070", false, false, false); err == nil {
		t.Error("CheckExposure of an address without a port: no error")
	}
}

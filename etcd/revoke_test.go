package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/turnstilelock/turnstile/etcd"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
)

// TestRevokeKeepsTheCallersDeadline: a failed acquisition revokes its
// lease, and when the cluster cannot answer the revocation must not hold
// the caller past its context (it goes on in the background, and Close
// ends it). A stopped server stands for a member cut off from the others.
func TestRevokeKeepsTheCallersDeadline(t *testing.T) {
	srv, err := etcdproc.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	ctx := ctxFor(t, time.Minute)
	b, err := etcd.Dial(ctx, clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := b.Client().Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	start := time.Now()
	b.RevokeLease(rctx, lease.ID)
	took := time.Since(start)
	cancel()
	// The revocation alone may wait 5 s for an answer; the caller waits
	// for its own 100 ms (and a descheduled goroutine's slack).
	if took > 3*time.Second {
		t.Errorf("revoking with a 100ms context took %v while the server was stopped", took)
	}
	start = time.Now()
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Close waited %v for a revocation the server could not answer", took)
	}
}

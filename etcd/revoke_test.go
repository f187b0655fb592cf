package etcd_test

import (
	"context"
	"testing"
	"time"
)

// TestRevokeKeepsTheCallersDeadline: a failed acquisition revokes its
// lease, and when the cluster cannot answer the revocation must not hold
// the caller past its context (it goes on in the background, and Close
// ends it). A stopped server stands for a member cut off from the others.
func TestRevokeKeepsTheCallersDeadline(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	srv, b := startOwn(t, ctx)
	lease := grant(t, ctx, b)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	start := time.Now()
	b.RevokeLease(rctx, lease)
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

package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCallUndoAfterAbandon: a request whose caller's context ends while
// it is in flight, and which then succeeds, is undone; one that fails, or
// whose reply the caller takes, is not.
func TestCallUndoAfterAbandon(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	undone := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := callUndo(ctx, func() (string, error) {
			close(started)
			<-release
			return "/q/owner-0000000001", nil
		}, func(p string) { undone <- p })
		got <- err
	}()
	<-started // in flight
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("callUndo after cancel = %v, want context.Canceled", err)
	}
	close(release) // the server's reply comes after the caller left
	select {
	case p := <-undone:
		if p != "/q/owner-0000000001" {
			t.Fatalf("undid %q", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a request that succeeded after its caller left was not undone")
	}

	// A failed request has nothing to undo.
	ctx, cancel = context.WithCancel(context.Background())
	fail, started2 := make(chan struct{}), make(chan struct{})
	finished := make(chan struct{})
	go func() {
		_, _ = callUndo(ctx, func() (string, error) {
			defer close(finished)
			close(started2)
			<-fail
			return "", errors.New("refused")
		}, func(p string) { undone <- p })
	}()
	<-started2
	cancel()
	close(fail)
	<-finished
	// The taken reply is the caller's: no undo either.
	if v, err := callUndo(context.Background(), func() (string, error) { return "/q/x", nil }, func(p string) { undone <- p }); v != "/q/x" || err != nil {
		t.Fatalf("callUndo = %q, %v", v, err)
	}
	time.Sleep(50 * time.Millisecond) // let a wrong undo show
	select {
	case p := <-undone:
		t.Fatalf("undid %q, which failed or whose reply was taken", p)
	default:
	}
}

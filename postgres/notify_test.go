package postgres_test

import (
	"testing"
	"time"
)

// TestReleasedNotifies: a release through one Backend wakes a waiter
// subscribed through another, and only the waiter on that key.
func TestReleasedNotifies(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	holder, waiter := dial(t, srv), dial(t, srv)
	if _, ok, err := holder.Acquire(ctx, "notify-a", "o", time.Minute); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	chA, stopA, err := waiter.Released(ctx, "notify-a")
	if err != nil {
		t.Fatal(err)
	}
	defer stopA()
	chB, stopB, err := waiter.Released(ctx, "notify-b")
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	if ok, err := holder.Release(ctx, "notify-a", "o"); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	select {
	case <-chA:
	case <-time.After(5 * time.Second):
		t.Fatal("no notice of the release within 5s")
	}
	select {
	case <-chB:
		t.Fatal("the waiter on another key was woken")
	case <-time.After(100 * time.Millisecond):
	}
}

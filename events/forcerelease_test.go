package events_test

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
)

// TestFromLockForceReleased: an operator's forced release becomes a
// FORCE_RELEASED event naming the removed holder, which Validate accepts.
func TestFromLockForceReleased(t *testing.T) {
	ev, ok := events.FromLock(turnstile.Event{
		Type: turnstile.EventForceReleased, Time: time.Now(), Backend: "redis 127.0.0.1:6379",
		Key: "lock:report", Owner: "host-1/ABC", Token: 42,
	})
	if !ok {
		t.Fatal("FromLock does not convert EventForceReleased")
	}
	if ev.Type != events.TypeForceReleased || ev.Key != "lock:report" || ev.Owner != "host-1/ABC" || ev.Token != 42 {
		t.Errorf("FromLock = %+v", ev)
	}
	if events.TypeForceReleased != "FORCE_RELEASED" {
		t.Errorf("TypeForceReleased = %q", events.TypeForceReleased)
	}
	if err := ev.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

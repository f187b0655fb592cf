package main

import (
	"strings"
	"testing"
	"time"
)

// TestHoldURL: a lock-delay cell's workers open a fallback pair with a
// grace, and a Redlock with a quarantine, that cover TTL + delay; other
// URLs are left as they are.
func TestHoldURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redlock://a:1,b:2?quarantine=2s", "quarantine=12s"},
		{"fallback://?primary=redis%3A%2F%2Fa%3A1&grace=2s&trip_after=2", "grace=12s"},
		{"redis://a:1", "redis://a:1"},
	} {
		got, err := (&deployment{url: tc.url}).holdURL(6 * time.Second)
		if err != nil || !strings.Contains(got, tc.want) {
			t.Errorf("holdURL(%s) = %q, %v; want it to contain %q", tc.url, got, err, tc.want)
		}
	}
}

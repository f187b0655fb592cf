package fallback

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

// TestReadRegister: the last switch lock held says the phase, by its
// direction and the time it has left on the secondary's clock.
func TestReadRegister(t *testing.T) {
	const prefix = "turnstile:fallback/"
	g := 31 * time.Second
	held := func(n string, dir string, left time.Duration) driver.LockState {
		return driver.LockState{Key: prefix + n, Held: true, Holders: []driver.Holder{{Owner: switchOwner(dir, g), TTL: left}}}
	}
	for _, tc := range []struct {
		name   string
		states []driver.LockState
		want   phase
		gen    uint64
		left   time.Duration
	}{
		{"none", nil, phasePrimary, 0, 0},
		{"failover in its grace", []driver.LockState{held("1", dirFailover, switchTTL-time.Second)}, phaseToSecondary, 1, g - time.Second},
		{"failover served", []driver.LockState{held("1", dirFailover, switchTTL-g)}, phaseSecondary, 1, 0},
		{"failover lapsing", []driver.LockState{held("1", dirFailover, g)}, phaseToPrimary, 1, g},
		{"failback in its grace", []driver.LockState{held("1", dirFailover, time.Hour), held("2", dirFailback, switchTTL-time.Second)}, phaseToPrimary, 2, g - time.Second},
		{"failback done", []driver.LockState{held("2", dirFailback, time.Hour), held("1", dirFailover, time.Minute)}, phasePrimary, 2, 0},
		{"the highest number wins, in any order", []driver.LockState{held("9", dirFailover, switchTTL-time.Hour), held("10", dirFailback, switchTTL-2*time.Hour), held("8", dirFailback, time.Hour)}, phasePrimary, 10, 0},
		{"free locks are no switch", []driver.LockState{{Key: prefix + "3"}, held("2", dirFailover, switchTTL-time.Hour)}, phaseSecondary, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := readRegister(prefix, tc.states)
			if err != nil || r.phase != tc.want || r.gen != tc.gen || r.left != tc.left {
				t.Fatalf("readRegister = %+v, %v; want %v, switch %d, %v left", r, err, tc.want, tc.gen, tc.left)
			}
		})
	}
	for _, bad := range []driver.LockState{
		{Key: prefix + "1", Held: true, Holders: []driver.Holder{{Owner: "someone/else", TTL: time.Minute}}},
		{Key: prefix + "x", Held: true, Holders: []driver.Holder{{Owner: switchOwner(dirFailover, g), TTL: time.Minute}}},
		{Key: prefix + "1", Held: true, Holders: []driver.Holder{{Owner: switchOwner(dirFailover, g), TTL: -1}}},
	} {
		if r, err := readRegister(prefix, []driver.LockState{bad}); err == nil {
			t.Errorf("readRegister(%+v) = %+v, want an error", bad, r)
		}
	}
}

// TestTTLLimits: MaxTTL leaves the drift and the look's room, the grace
// a URL derives from a TTL allows that TTL, and trust is at least the
// room left.
func TestTTLLimits(t *testing.T) {
	if got, want := MaxTTL(DefaultGrace), 30278*time.Millisecond; got != want {
		t.Errorf("MaxTTL(%v) = %v, want %v", DefaultGrace, got, want)
	}
	if MaxTTL(time.Millisecond) != 0 {
		t.Errorf("MaxTTL(1ms) = %v, want 0", MaxTTL(time.Millisecond))
	}
	for _, ttl := range []time.Duration{time.Millisecond, time.Second, 30 * time.Second, 30279 * time.Millisecond, time.Minute, 24 * time.Hour} {
		g := graceFor(ttl)
		if MaxTTL(g) < ttl || g%time.Second != 0 || (g > DefaultGrace && MaxTTL(g-time.Second) >= ttl) {
			t.Errorf("graceFor(%v) = %v (MaxTTL %v): want the shortest whole seconds, at least %v, that allow it", ttl, g, MaxTTL(g), DefaultGrace)
		}
		if d := trust(g, ttl); d < lookRoom(g) {
			t.Errorf("trust(%v, %v) = %v, below the room %v", g, ttl, d, lookRoom(g))
		}
	}
}

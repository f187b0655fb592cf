package turnstile

import "testing"

// TestObserveDropsStaleLeaders: an observer reports a leader only when it
// is news — never an older leader after a newer one, never the same lease
// twice.
func TestObserveDropsStaleLeaders(t *testing.T) {
	none := Leader{}
	a := Leader{Elected: true, Value: "a", Term: 5, Owner: "a/1"}
	b := Leader{Elected: true, Value: "b", Term: 7, Owner: "b/1"}
	aLater := a
	aLater.Term = 6 // the same lease, a larger token from another member
	unknown := Leader{Elected: true, Value: "c", Owner: "c/1"}
	for _, tc := range []struct {
		name      string
		last, cur Leader
		top       uint64
		reported  bool
		want      bool
	}{
		{"first report, no leader", none, none, 0, false, true},
		{"first report, a leader", none, a, 0, false, true},
		{"no change", a, a, 5, true, false},
		{"no leader still", none, none, 5, true, false},
		{"leader resigned", a, none, 5, true, true},
		{"next leader", a, b, 5, true, true},
		{"next leader after a gap", none, b, 5, true, true},
		{"older leader after a newer", b, a, 7, true, false},
		{"older leader after no leader", none, a, 7, true, false},
		{"reported leader again after no leader", none, a, 5, true, false},
		{"same lease, greater term", a, aLater, 5, true, true},
		{"same lease, smaller term", aLater, a, 6, true, false},
		{"a store that cannot tell terms", a, unknown, 5, true, true},
	} {
		if got := fresh(tc.last, tc.cur, tc.top, tc.reported); got != tc.want {
			t.Errorf("%s: fresh(%v, %v, top %d) = %v, want %v", tc.name, tc.last, tc.cur, tc.top, got, tc.want)
		}
	}
}

// TestLeaderValue: the value is the owner id up to its last '/'.
func TestLeaderValue(t *testing.T) {
	for owner, want := range map[string]string{
		"10.0.0.7:8080/ABCDEF": "10.0.0.7:8080",
		"a/b/ABCDEF":           "a/b",
		"/ABCDEF":              "",
		"no-slash":             "no-slash",
	} {
		if got := leaderValue(owner); got != want {
			t.Errorf("leaderValue(%q) = %q, want %q", owner, got, want)
		}
	}
}

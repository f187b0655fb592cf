package turnstile

import "testing"

// TestObserveDropsStaleLeaders: an observer reports a leader only when it
// is news — never an older leader after a newer one, never the same lease
// twice in a row — and reports the leader it reported last again after an
// answer of no leader that missed it (a Redlock node that did not answer
// one Inspect): the lease's owner id is its own, so it still leads.
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
		top       Leader
		reported  bool
		want      bool
	}{
		{"first report, no leader", none, none, none, false, true},
		{"first report, a leader", none, a, none, false, true},
		{"no change", a, a, a, true, false},
		{"no leader still", none, none, a, true, false},
		{"leader resigned", a, none, a, true, true},
		{"next leader", a, b, a, true, true},
		{"next leader after a gap", none, b, a, true, true},
		{"older leader after a newer", b, a, b, true, false},
		{"older leader after no leader", none, a, b, true, false},
		{"the last leader again after an answer that missed it", none, a, a, true, true},
		{"same lease, greater term", a, aLater, a, true, true},
		{"same lease, smaller term", aLater, a, aLater, true, false},
		{"a store that cannot tell terms", a, unknown, a, true, true},
	} {
		if got := fresh(tc.last, tc.cur, tc.top, tc.reported); got != tc.want {
			t.Errorf("%s: fresh(%v, %v, top %v) = %v, want %v", tc.name, tc.last, tc.cur, tc.top, got, tc.want)
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

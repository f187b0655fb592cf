package main

import (
	"strings"
	"testing"
	"time"
)

// cleanSection is a clean critical section of worker w: granted token tok at
// t (ms), the fenced counter read as v and written as v+1.
func cleanSection(w, cs int, tok uint64, t int64, v int64) []event {
	ms := func(x int64) int64 { return (t + x) * int64(time.Millisecond) }
	return []event{
		{W: w, CS: cs, Ev: evAcquired, Tok: tok, Start: ms(0), End: ms(1)},
		{W: w, CS: cs, Ev: evCall, Op: evMark, Tok: tok, Start: ms(2)},
		{W: w, CS: cs, Ev: evMark, Tok: tok, Res: resOK, Start: ms(2), End: ms(3)},
		{W: w, CS: cs, Ev: evRead, Tok: tok, Val: v, Start: ms(3), End: ms(4)},
		{W: w, CS: cs, Ev: evCRead, Tok: tok, Val: v, Start: ms(4), End: ms(5)},
		{W: w, CS: cs, Ev: evHold, Tok: tok, Start: ms(5)},
		{W: w, CS: cs, Ev: evCall, Op: evCWrite, Tok: tok, Val: v + 1, Start: ms(6)},
		{W: w, CS: cs, Ev: evCWrite, Tok: tok, Val: v + 1, Res: resOK, Start: ms(6), End: ms(7)},
		{W: w, CS: cs, Ev: evCall, Op: evWrite, Tok: tok, Val: v + 1, Start: ms(7)},
		{W: w, CS: cs, Ev: evWrite, Tok: tok, Val: v + 1, Res: resOK, Start: ms(7), End: ms(8)},
		{W: w, CS: cs, Ev: evReleased, Tok: tok, Res: resOK, Start: ms(8), End: ms(9)},
	}
}

func history(parts ...[]event) []event {
	var out []event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestCheckCleanHistory: three sections one after another with rising
// tokens pass every check.
func TestCheckCleanHistory(t *testing.T) {
	h := history(cleanSection(1, 1, 10, 0, 0), cleanSection(2, 1, 11, 10, 1), cleanSection(1, 2, 12, 20, 2))
	v := check(h, nil, 3, 3, time.Second, int64(30*time.Millisecond))
	if v.Violations() != 0 || v.Linearizable != "ok" || v.ControlLost != 0 || v.Sections != 3 || v.Overlaps != 0 {
		t.Fatalf("clean history judged %+v", v)
	}
}

// TestCheckTokenOrder: a grant that returned after another completed
// must carry a larger token.
func TestCheckTokenOrder(t *testing.T) {
	h := history(cleanSection(1, 1, 10, 0, 0), cleanSection(2, 1, 9, 10, 1))
	v := check(h, nil, 2, 2, time.Second, int64(30*time.Millisecond))
	if v.TokenOrder != 1 || !strings.Contains(v.Example, "token 9") {
		t.Fatalf("token 9 after token 10: %+v", v)
	}
}

// TestCheckLostUpdate: two sections that both read 0 and wrote 1 lost an
// increment, fenced (a violation) or in the control (its count).
func TestCheckLostUpdate(t *testing.T) {
	h := history(cleanSection(1, 1, 10, 0, 0), cleanSection(2, 1, 11, 10, 0))
	v := check(h, nil, 1, 1, time.Second, int64(30*time.Millisecond))
	if v.FencedLost != 1 || v.ControlLost != 1 {
		t.Fatalf("two writes of 1: %+v", v)
	}
	if v.Linearizable != "illegal" {
		t.Errorf("a read of 0 after a write of 1 was judged %q", v.Linearizable)
	}
	// The final value short of the acknowledged increments is a loss too.
	v = check(history(cleanSection(1, 1, 10, 0, 0), cleanSection(2, 1, 11, 10, 1)), nil, 1, 2, time.Second, 0)
	if v.FencedLost != 1 {
		t.Fatalf("final 1 after 2 acknowledged increments: %+v", v)
	}
}

// TestCheckStaleWriteAccepted: a register that accepts a write with a
// token below one it accepted before is not linearizable.
func TestCheckStaleWriteAccepted(t *testing.T) {
	h := history(cleanSection(1, 1, 10, 0, 0), cleanSection(2, 1, 11, 10, 1))
	// Worker 1, token 10, writes after token 11 did and is accepted.
	h = append(h,
		event{W: 1, CS: 9, Ev: evCall, Op: evWrite, Tok: 10, Val: 7, Start: int64(40 * time.Millisecond)},
		event{W: 1, CS: 9, Ev: evWrite, Tok: 10, Val: 7, Res: resOK, Start: int64(40 * time.Millisecond), End: int64(41 * time.Millisecond)})
	v := check(h, nil, 7, 2, time.Second, 0)
	if v.Linearizable != "illegal" {
		t.Fatalf("a stale write accepted was judged %q", v.Linearizable)
	}
	// Refused, it is fine — and counted.
	h[len(h)-1].Res = resStale
	v = check(h, nil, 2, 2, time.Second, 0)
	if v.Linearizable != "ok" || v.StaleRefused != 1 || v.Violations() != 0 {
		t.Fatalf("a stale write refused: %+v", v)
	}
}

// TestCheckUnknownOutcome: a write whose worker was killed may or may not
// have landed; either is linearizable.
func TestCheckUnknownOutcome(t *testing.T) {
	killed := cleanSection(1, 1, 10, 0, 0)[:9] // the fenced write was called, never returned
	for _, final := range []int64{0, 1} {
		h := history(killed)
		if final == 1 {
			h = append(h, cleanSection(2, 1, 11, 20, 1)...)
		} else {
			h = append(h, cleanSection(2, 1, 11, 20, 0)...)
		}
		v := check(h, nil, final+1, 2, time.Second, 0)
		if v.Linearizable != "ok" || v.FencedPending != 1 || v.Violations() != 0 {
			t.Fatalf("killed writer, write landed=%v: %+v", final == 1, v)
		}
	}
}

// TestCheckLiveness: no grant within the bound after a heal is counted;
// the p99 covers attempts begun during the fault.
func TestCheckLiveness(t *testing.T) {
	ms := int64(time.Millisecond)
	h := history(cleanSection(1, 1, 10, 0, 0),
		[]event{{W: 2, CS: 1, Ev: evAcquireFail, Start: 20 * ms, End: 520 * ms}},
		cleanSection(2, 2, 11, 3000, 1))
	v := check(h, []window{{Inject: 10 * ms, Heal: 100 * ms}}, 2, 2, time.Second, 4000*ms)
	if v.Unrecovered != 1 || v.AcquireP99 != 500*time.Millisecond || v.AcquireFailed != 1 {
		t.Fatalf("grant 2.9 s after the heal, bound 1 s: %+v", v)
	}
	v = check(h, []window{{Inject: 10 * ms, Heal: 100 * ms}}, 2, 2, 5*time.Second, 4000*ms)
	if v.Unrecovered != 0 || v.Recovery != 2901*time.Millisecond {
		t.Fatalf("grant 2.9 s after the heal, bound 5 s: %+v", v)
	}
}

// FuzzCheck: any history, however malformed, is judged without a panic,
// and the counts stay consistent.
func FuzzCheck(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte("\x00\x01\x02\x03\x00\x01\x02\x03"))
	f.Fuzz(func(t *testing.T, b []byte) {
		kinds := []string{evAcquired, evAcquireFail, evCall, evMark, evRead, evWrite, evCRead, evCWrite, evHold, evValid, evReleased}
		ops := []string{evMark, evWrite, evCWrite, "long", ""}
		res := []string{resOK, resStale, resUnknown, ""}
		var h []event
		for i := 0; i+3 < len(b) && len(h) < 40; i += 4 {
			h = append(h, event{W: int(b[i] % 3), CS: int(b[i+1] % 4), Ev: kinds[int(b[i+2])%len(kinds)],
				Op: ops[int(b[i+3])%len(ops)], Tok: uint64(b[i+1] % 5), Val: int64(b[i+3] % 4),
				Res: res[int(b[i])%len(res)], Start: int64(i), End: int64(i + int(b[i+2]%7)), U: int64(i + int(b[i+3]%9))})
		}
		v := check(h, []window{{Inject: 2, Heal: 9, Cut: 3, CutEnd: 8}}, int64(len(b)%5), int64(len(b)%3), 5, 100)
		if v.Violations() < 0 || v.Sections < 0 || v.FencedLost < 0 || v.ControlLost < 0 {
			t.Fatalf("negative counts: %+v", v)
		}
		if v.DoubleGrants < 0 || v.DoubleGrants > v.Sections || v.Unreplicated < 0 || v.Unreplicated > v.Sections {
			t.Fatalf("double grants %d, unreplicated %d of %d sections", v.DoubleGrants, v.Unreplicated, v.Sections)
		}
	})
}

// onKey puts a section's events on lane k.
func onKey(k int, evs []event) []event {
	for i := range evs {
		evs[i].K = k
	}
	return evs
}

// TestCheckKeys: every key is checked on its own — the same tokens and
// register values on two keys are no violation — and a lost update on
// one key counts, named by its key.
func TestCheckKeys(t *testing.T) {
	clean := history(
		onKey(0, cleanSection(1, 1, 10, 0, 0)), onKey(1, cleanSection(2, 1, 10, 0, 0)),
		onKey(0, cleanSection(2, 2, 11, 10, 1)), onKey(1, cleanSection(1, 2, 11, 10, 1)),
	)
	v := checkKeys(clean, nil, []finals{{2, 2}, {2, 2}}, time.Second, int64(30*time.Millisecond))
	if v.Violations() != 0 || v.Linearizable != "ok" || v.Sections != 4 || v.Overlaps != 0 || v.ControlLost != 0 {
		t.Fatalf("two clean keys judged %+v", v)
	}
	// On key 1 both sections read 0: the fenced register lost one.
	lossy := history(
		onKey(0, cleanSection(1, 1, 10, 0, 0)), onKey(1, cleanSection(2, 1, 10, 0, 0)),
		onKey(0, cleanSection(2, 2, 11, 10, 1)), onKey(1, cleanSection(1, 2, 11, 10, 0)),
	)
	v = checkKeys(lossy, nil, []finals{{2, 2}, {1, 1}}, time.Second, int64(30*time.Millisecond))
	if v.FencedLost != 1 || v.ControlLost != 1 || v.Linearizable != "illegal" || !strings.HasPrefix(v.Example, "key 1: ") {
		t.Fatalf("a lost update on key 1 judged %+v", v)
	}
}

// held is a section of worker w from its grant at from to its release at
// rel (ms), whose lease was valid until until (ms) by its own clock, and
// later until renewed (ms) if renewed is not 0.
func held(w int, tok uint64, from, rel, until, renewed int64) []event {
	ms := int64(time.Millisecond)
	evs := []event{{W: w, CS: 1, Ev: evAcquired, Tok: tok, Start: (from - 1) * ms, End: from * ms, U: until * ms}}
	if renewed != 0 {
		evs = append(evs, event{W: w, CS: 1, Ev: evValid, Tok: tok, Start: (renewed - 1) * ms, U: renewed * ms})
	}
	return append(evs, event{W: w, CS: 1, Ev: evReleased, Tok: tok, Res: resOK, Start: rel * ms, End: (rel + 1) * ms})
}

// killedReleasing is a section of worker w granted at from whose release
// was announced at rel (ms) and never returned: the worker was killed
// while releasing.
func killedReleasing(w int, tok uint64, from, rel, until int64) []event {
	ms := int64(time.Millisecond)
	return []event{
		{W: w, CS: 1, Ev: evAcquired, Tok: tok, Start: (from - 1) * ms, End: from * ms, U: until * ms},
		{W: w, CS: 1, Ev: evCall, Op: evReleased, Tok: tok, Start: rel * ms},
	}
}

// TestCheckDoubleGrants: a grant while an earlier lease is valid and not
// released is a double grant; a grant after the earlier lease ended by
// its own clock — a holder paused past its lease — is an overlap only. A
// worker killed while its lease stands did nothing after its last event:
// a grant then is a double grant but no overlap.
func TestCheckDoubleGrants(t *testing.T) {
	for _, c := range []struct {
		name     string
		h        []event
		double   int
		overlaps int // a killed worker's section ends with its last event
	}{
		{"one after another", history(held(1, 16, 10, 20, 500, 0), held(2, 32, 30, 40, 520, 0)), 0, 0},
		{"granted while the first is valid", history(held(1, 16, 10, 900, 500, 0), held(2, 32, 300, 310, 800, 0)), 1, 1},
		{"the first paused past its lease", history(held(1, 16, 10, 2000, 500, 0), held(2, 32, 600, 610, 1100, 0)), 0, 1},
		{"granted while a renewed lease is valid", history(held(1, 16, 10, 2000, 500, 1400), held(2, 32, 1000, 1010, 1500, 0)), 1, 1},
		{"released before its lease ended", history(held(1, 16, 10, 20, 500, 0), held(2, 32, 300, 310, 800, 0)), 0, 0},
		{"killed while releasing", history(killedReleasing(1, 16, 10, 20, 500), held(2, 32, 30, 40, 520, 0)), 0, 0},
		{"killed before releasing", history(held(1, 16, 10, 900, 500, 0)[:1], held(2, 32, 30, 40, 520, 0)), 1, 0},
		{"two granted inside one lease", history(held(1, 16, 10, 2000, 1500, 0), held(2, 32, 300, 310, 800, 0), held(3, 48, 900, 910, 1400, 0)), 2, 2},
	} {
		v := check(c.h, nil, 0, 0, time.Second, int64(3*time.Second))
		if v.DoubleGrants != c.double || (c.double > 0) != (v.DoubleGrant != "") {
			t.Errorf("%s: %d double grants (%q), want %d", c.name, v.DoubleGrants, v.DoubleGrant, c.double)
		}
		if v.Overlaps != c.overlaps {
			t.Errorf("%s: %d overlaps, want %d", c.name, v.Overlaps, c.overlaps)
		}
	}
}

// TestCheckUnreplicated: grants begun after a fault cut the primary off
// from its replica and returned before the heal began are counted; one
// begun before the cut, or returned after the heal began, is not.
func TestCheckUnreplicated(t *testing.T) {
	ms := int64(time.Millisecond)
	w := []window{{Inject: 100 * ms, Cut: 110 * ms, CutEnd: 900 * ms, Heal: 950 * ms}}
	h := history(
		held(1, 16, 108, 109, 600, 0),    // asked before the cut
		held(2, 32, 200, 201, 700, 0),    // inside
		held(3, 48, 899, 900, 1400, 0),   // inside
		held(1, 64, 905, 906, 1400, 0),   // returned after the heal began
		held(2, 80, 1000, 1001, 1500, 0), // after
	)
	if v := check(h, w, 0, 0, time.Second, 2000*ms); v.Unreplicated != 2 {
		t.Fatalf("%d grants without a replica, want 2", v.Unreplicated)
	}
	if v := check(h, []window{{Inject: 100 * ms, Heal: 950 * ms}}, 0, 0, time.Second, 2000*ms); v.Unreplicated != 0 {
		t.Fatalf("a fault that cut nothing: %d grants without a replica", v.Unreplicated)
	}
}

// TestCheckKeysDoubleGrant: a double grant on one key of a multi-key run
// is described in the verdict, named by its key, as a one-key run
// describes it.
func TestCheckKeysDoubleGrant(t *testing.T) {
	h := history(
		onKey(0, held(1, 16, 10, 20, 500, 0)), onKey(0, held(2, 32, 30, 40, 520, 0)),
		onKey(1, held(1, 16, 10, 900, 500, 0)), onKey(1, held(2, 32, 300, 310, 800, 0)),
	)
	v := checkKeys(h, nil, []finals{{0, 0}, {0, 0}}, time.Second, int64(3*time.Second))
	if v.DoubleGrants != 1 || !strings.HasPrefix(v.DoubleGrant, "key 1: worker 2 was granted token 32") {
		t.Fatalf("a double grant on key 1: %d double grants, described %q", v.DoubleGrants, v.DoubleGrant)
	}
}

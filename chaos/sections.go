package main

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// span is one critical section as the checks see it.
type span struct {
	w     int
	tok   uint64
	from  int64 // the grant returned (Acquire's end)
	rel   int64 // Release was called (announced or returned); math.MaxInt64 if it never was
	until int64 // the latest end of its lease its events reported (U)
	last  int64 // its latest event: a worker killed in it did nothing after
}

// spans are the critical sections of events, in the order their grants
// returned.
func spans(events []event) []*span {
	type slot struct{ w, cs int }
	bySlot := map[slot]*span{}
	var list []*span
	for _, e := range events {
		s := slot{e.W, e.CS}
		sp := bySlot[s]
		if e.Ev == evAcquired {
			sp = &span{w: e.W, tok: e.Tok, from: e.End, rel: math.MaxInt64}
			bySlot[s] = sp
			list = append(list, sp)
		}
		if sp == nil {
			continue
		}
		sp.until = max(sp.until, e.U)
		sp.last = max(sp.last, e.Start, e.End)
		if e.Ev == evReleased || (e.Ev == evCall && e.Op == evReleased) {
			sp.rel = min(sp.rel, e.Start)
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].from < list[j].from })
	return list
}

// overlaps counts critical sections that began (their grant returned)
// before an earlier-granted one ended (its release was called, or its
// worker was killed: nothing after its last event). A paused holder makes
// them on every store: the lock alone cannot prevent it.
func overlaps(list []*span) int {
	n := 0
	var maxTo int64
	for i, sp := range list {
		if i > 0 && sp.from < maxTo {
			n++
		}
		maxTo = max(maxTo, min(sp.rel, sp.last))
	}
	return n
}

// doubleGrants counts the sections granted while an earlier section's
// lease was valid (the latest end its events reported, U) and the earlier
// section had not begun its release. Both held the lock at the moment the
// later grant returned: the store granted it twice. A section whose holder
// was paused past its lease's end does not count: its lease had ended by
// its own clock, and the fence is what stops its writes.
func doubleGrants(v *verdict, list []*span) int {
	n := 0
	var held *span // of the sections granted before, the one held longest
	var heldTo int64
	for _, sp := range list {
		if held != nil && sp.from < heldTo {
			n++
			if v.DoubleGrant == "" {
				v.DoubleGrant = fmt.Sprintf("worker %d was granted token %d while worker %d's lease of token %d was valid for %.0f ms more", sp.w, sp.tok, held.w, held.tok, ms(time.Duration(heldTo-sp.from)))
			}
		}
		if to := min(sp.until, sp.rel); to > heldTo {
			held, heldTo = sp, to
		}
	}
	return n
}

// unreplicated counts the grants made while a fault had cut the key's
// primary off from its replica: acquisitions begun after the cut that
// returned before the heal began.
func unreplicated(acqs []event, windows []window) int {
	n := 0
	for _, a := range acqs {
		for _, w := range windows {
			if w.Cut != 0 && a.Start >= w.Cut && a.End <= w.CutEnd {
				n++
				break
			}
		}
	}
	return n
}

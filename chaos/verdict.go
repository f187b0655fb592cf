package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// window is one fault: injected at Inject, healed at Heal (Unix ns).
// A fault that cuts the key's primary off from its replica (failover)
// also sets Cut and CutEnd: no grant made in between can reach a replica.
type window struct {
	Inject, Heal int64
	Cut, CutEnd  int64
}

// verdict is what the checks found in one run of one store under one
// fault.
type verdict struct {
	Sections      int `json:"sections"`       // critical sections entered (acquisitions granted)
	AcquireFailed int `json:"acquire_failed"` // acquisitions that failed or timed out
	// Safety of the fenced register: every count here must be zero.
	TokenOrder   int    `json:"token_order_violations"` // grants whose token is not above an earlier grant's
	FencedLost   int    `json:"fenced_lost_updates"`    // acknowledged fenced increments lost
	Linearizable string `json:"linearizable"`           // porcupine: ok, illegal, unknown
	StaleRefused int    `json:"stale_refused"`          // writes the fence refused (the fence at work)
	ControlLost  int    `json:"control_lost_updates"`   // the unfenced control's lost increments
	Overlaps     int    `json:"overlapping_sections"`   // sections that began before an earlier one ended
	// DoubleGrants are sections granted while an earlier holder's lease
	// was still valid by that holder's own clock, and not released: the
	// store let two holders in at once. An overlap that is not one is a
	// holder that outlived its lease (paused, or descheduled), which its
	// lease told it.
	DoubleGrants int    `json:"double_grants"`
	DoubleGrant  string `json:"double_grant,omitempty"` // the first, described
	// Unreplicated are sections granted while the key's primary was cut
	// off from its replica (windows' Cut to CutEnd): a failover loses
	// them. With wait_replicas there are none.
	Unreplicated   int           `json:"unreplicated_grants"`
	Unrecovered    int           `json:"unrecovered"` // faults after whose heal no lock was granted within the bound
	Recovery       time.Duration `json:"-"`
	RecoveryMS     float64       `json:"recovery_ms"`       // the longest time from a heal to the next grant
	BoundMS        float64       `json:"recovery_bound_ms"` // the most a grant may take after a heal
	AcquireP99     time.Duration `json:"-"`
	AcquireP99MS   float64       `json:"acquire_p99_during_fault_ms"`
	Example        string        `json:"example,omitempty"` // the first violation, described
	FencedAcked    int           `json:"fenced_acked"`
	ControlAcked   int           `json:"control_acked"`
	FencedFinal    int64         `json:"fenced_final"`
	ControlFinal   int64         `json:"control_final"`
	FencedPending  int           `json:"fenced_pending"`
	ControlPending int           `json:"control_pending"`
}

// Violations is the number of safety violations of the fenced register.
func (v *verdict) Violations() int {
	n := v.TokenOrder + v.FencedLost
	if v.Linearizable == "illegal" {
		n++
	}
	return n
}

func (v *verdict) note(format string, args ...any) {
	if v.Example == "" {
		v.Example = fmt.Sprintf(format, args...)
	}
}

// check runs every check over the workers' events. fencedFinal and
// controlFinal are the registers' values read after the run; bound is how
// long after a heal a grant must come.
func check(events []event, windows []window, fencedFinal, controlFinal int64, bound time.Duration, end int64) verdict {
	v := verdict{FencedFinal: fencedFinal, ControlFinal: controlFinal, BoundMS: ms(bound)}
	var acqs []event
	var attempts []event
	for _, e := range events {
		switch e.Ev {
		case evAcquired:
			acqs = append(acqs, e)
			attempts = append(attempts, e)
		case evAcquireFail:
			v.AcquireFailed++
			attempts = append(attempts, e)
		case evMark, evWrite:
			if e.Res == resStale {
				v.StaleRefused++
			}
		}
	}
	v.Sections = len(acqs)
	checkTokenOrder(&v, acqs)
	checkCounters(&v, events)
	sections := spans(events)
	v.Overlaps = overlaps(sections)
	v.DoubleGrants = doubleGrants(&v, sections)
	v.Unreplicated = unreplicated(acqs, windows)
	v.Linearizable = linearizable(events)
	checkLiveness(&v, acqs, attempts, windows, bound, end)
	return v
}

// finals are a key's registers read after the run.
type finals struct{ fenced, control int64 }

// checkKeys checks a run whose workers locked len(fin) keys side by side
// (lane k's registers read fin[k]): every key on its own, as check does,
// then the counts added up. A fault's recovery is the slowest key's, and
// the p99 acquire is over every key's acquisitions.
func checkKeys(events []event, windows []window, fin []finals, bound time.Duration, end int64) verdict {
	if len(fin) == 1 {
		return check(events, windows, fin[0].fenced, fin[0].control, bound, end)
	}
	lanes := make([][]event, len(fin))
	var attempts []event
	for _, e := range events {
		if e.K >= 0 && e.K < len(lanes) {
			lanes[e.K] = append(lanes[e.K], e)
		}
		if e.Ev == evAcquired || e.Ev == evAcquireFail {
			attempts = append(attempts, e)
		}
	}
	out := verdict{BoundMS: ms(bound), Linearizable: "ok"}
	for k, evs := range lanes {
		v := check(evs, windows, fin[k].fenced, fin[k].control, bound, end)
		out.Sections += v.Sections
		out.AcquireFailed += v.AcquireFailed
		out.TokenOrder += v.TokenOrder
		out.FencedLost += v.FencedLost
		out.StaleRefused += v.StaleRefused
		out.ControlLost += v.ControlLost
		out.Overlaps += v.Overlaps
		out.DoubleGrants += v.DoubleGrants
		out.Unreplicated += v.Unreplicated
		out.Unrecovered = max(out.Unrecovered, v.Unrecovered)
		out.Recovery = max(out.Recovery, v.Recovery)
		out.FencedAcked += v.FencedAcked
		out.ControlAcked += v.ControlAcked
		out.FencedFinal += v.FencedFinal
		out.ControlFinal += v.ControlFinal
		out.FencedPending += v.FencedPending
		out.ControlPending += v.ControlPending
		if rank(v.Linearizable) > rank(out.Linearizable) {
			out.Linearizable = v.Linearizable
		}
		if v.Example != "" {
			out.note("key %d: %s", k, v.Example)
		}
	}
	out.RecoveryMS = ms(out.Recovery)
	var all verdict
	checkLiveness(&all, nil, attempts, windows, bound, end)
	out.AcquireP99, out.AcquireP99MS = all.AcquireP99, all.AcquireP99MS
	return out
}

// rank orders porcupine's answers from best to worst.
func rank(linearizable string) int {
	switch linearizable {
	case "ok":
		return 0
	case "unknown":
		return 1
	}
	return 2
}

// checkTokenOrder: a grant that completed before another was asked for
// must carry the smaller token — tokens strictly increase in the order
// critical sections begin.
func checkTokenOrder(v *verdict, acqs []event) {
	byEnd := slices.Clone(acqs)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].End < byEnd[j].End })
	byStart := slices.Clone(acqs)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].Start < byStart[j].Start })
	var maxTok uint64
	var maxEv event
	i := 0
	for _, b := range byStart {
		for i < len(byEnd) && byEnd[i].End < b.Start {
			if byEnd[i].Tok > maxTok {
				maxTok, maxEv = byEnd[i].Tok, byEnd[i]
			}
			i++
		}
		if maxTok > 0 && b.Tok <= maxTok {
			v.TokenOrder++
			v.note("worker %d was granted token %d after worker %d's grant of token %d had completed", b.W, b.Tok, maxEv.W, maxTok)
		}
	}
}

// checkCounters: every critical section increments both counters by one
// (read, hold, write read+1). Acknowledged increments that the final value
// does not account for, or two acknowledged writes of the same value, are
// lost updates.
func checkCounters(v *verdict, events []event) {
	type slot struct{ w, cs int }
	called := map[slot]event{}
	var fenced, control []int64
	for _, e := range events {
		switch e.Ev {
		case evCall:
			if e.Op == evWrite || e.Op == evCWrite {
				called[slot{e.W, e.CS}] = e
			}
		case evWrite:
			if e.Res == resOK {
				fenced = append(fenced, e.Val)
			} else if e.Res == resUnknown {
				v.FencedPending++
			}
		case evCWrite:
			if e.Res == resOK {
				control = append(control, e.Val)
			} else {
				v.ControlPending++
			}
		}
	}
	// A call with no result: the worker was killed while writing.
	returned := map[slot]map[string]bool{}
	for _, e := range events {
		if e.Ev == evWrite || e.Ev == evCWrite {
			s := slot{e.W, e.CS}
			if returned[s] == nil {
				returned[s] = map[string]bool{}
			}
			returned[s][e.Ev] = true
		}
	}
	for _, e := range events {
		if e.Ev != evCall {
			continue
		}
		s := slot{e.W, e.CS}
		if (e.Op == evWrite || e.Op == evCWrite) && !returned[s][e.Op] {
			if e.Op == evWrite {
				v.FencedPending++
			} else {
				v.ControlPending++
			}
		}
	}
	v.FencedAcked, v.ControlAcked = len(fenced), len(control)
	v.FencedLost = lost(fenced, v.FencedFinal)
	v.ControlLost = lost(control, v.ControlFinal)
	if v.FencedLost > 0 {
		v.note("%d acknowledged fenced increments, final value %d: %d lost", len(fenced), v.FencedFinal, v.FencedLost)
	}
}

// lost is the number of acknowledged increments that did not survive:
// those whose value another acknowledged write also wrote, or that the
// final value falls short of, whichever is more.
func lost(acked []int64, final int64) int {
	distinct := map[int64]bool{}
	for _, x := range acked {
		distinct[x] = true
	}
	n := len(acked) - len(distinct)
	if short := int64(len(acked)) - final; short > int64(n) {
		n = int(short)
	}
	return n
}

// span is one critical section as the checks see it.
type span struct {
	w     int
	tok   uint64
	from  int64 // the grant returned (Acquire's end)
	rel   int64 // Release was called; math.MaxInt64 if it never was
	until int64 // the latest end of its lease its events reported (U)
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
		if e.Ev == evReleased {
			sp.rel = e.Start
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].from < list[j].from })
	return list
}

// overlaps counts critical sections that began (their grant returned)
// before an earlier-granted one ended (its release was called). A paused
// holder makes them on every store: the lock alone cannot prevent it.
func overlaps(list []*span) int {
	n := 0
	var maxTo int64
	for i, sp := range list {
		if i > 0 && sp.from < maxTo {
			n++
		}
		maxTo = max(maxTo, sp.rel)
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

// checkLiveness: after each heal a lock must be granted within bound; the
// p99 of acquisition attempts begun during a fault is reported.
func checkLiveness(v *verdict, acqs, attempts []event, windows []window, bound time.Duration, end int64) {
	var during []time.Duration
	for _, a := range attempts {
		for _, w := range windows {
			if a.Start >= w.Inject && a.Start <= w.Heal {
				during = append(during, time.Duration(a.End-a.Start))
				break
			}
		}
	}
	v.AcquireP99 = percentile(during, 0.99)
	v.AcquireP99MS = ms(v.AcquireP99)
	for _, w := range windows {
		next := int64(math.MaxInt64)
		for _, a := range acqs {
			if a.End >= w.Heal && a.End < next {
				next = a.End
			}
		}
		if next == math.MaxInt64 {
			if end-w.Heal >= int64(bound) {
				v.Unrecovered++
			}
			continue
		}
		r := time.Duration(next - w.Heal)
		if r > bound {
			v.Unrecovered++
		}
		if r > v.Recovery {
			v.Recovery = r
		}
	}
	v.RecoveryMS = ms(v.Recovery)
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(p*float64(len(d)))) - 1
	return d[max(i, 0)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

// The fenced register as porcupine sees it: a counter and the guard's
// last token. A mark or a write is applied when its token is at least the
// guard's (the register allows one lease several writes); a read returns
// the counter.
type regState struct {
	val   int64
	guard uint64
}

type regInput struct {
	op  string // evMark, evRead, evWrite
	tok uint64
	val int64
}

type regOutput struct {
	res string // resOK, resStale, resUnknown (mark, write)
	val int64  // read
}

var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		fresh := in.tok >= s.guard
		applied := s
		applied.guard = in.tok
		if in.op == evWrite {
			applied.val = in.val
		}
		switch in.op {
		case evRead:
			if out.val == s.val {
				return []any{s}
			}
			return nil
		default:
			switch out.res {
			case resOK:
				if fresh {
					return []any{applied}
				}
			case resStale:
				if !fresh {
					return []any{s}
				}
			default: // unknown: applied or not
				if fresh {
					return []any{s, applied}
				}
				return []any{s}
			}
			return nil
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if in.op == evRead {
			return fmt.Sprintf("read() -> %d", out.val)
		}
		return fmt.Sprintf("%s(tok %d, %d) -> %s", in.op, in.tok, in.val, out.res)
	},
}

// linearizable checks the fenced register's history with porcupine. A
// write whose result never came back (its worker was killed) stays open
// until the end of the history.
func linearizable(events []event) string {
	type slot struct {
		w, cs int
		op    string
	}
	calls := map[slot]event{}
	var ops []porcupine.Operation
	for _, e := range events {
		switch e.Ev {
		case evCall:
			if e.Op == evMark || e.Op == evWrite {
				calls[slot{e.W, e.CS, e.Op}] = e
			}
		case evRead:
			ops = append(ops, porcupine.Operation{ClientId: e.W, Input: regInput{op: evRead},
				Call: e.Start, Output: regOutput{val: e.Val}, Return: e.End})
		case evMark, evWrite:
			s := slot{e.W, e.CS, e.Ev}
			c, ok := calls[s]
			if !ok {
				c = e
			}
			delete(calls, s)
			ops = append(ops, porcupine.Operation{ClientId: e.W, Input: regInput{op: e.Ev, tok: e.Tok, val: e.Val},
				Call: c.Start, Output: regOutput{res: e.Res}, Return: e.End})
		}
	}
	for _, c := range calls {
		ops = append(ops, porcupine.Operation{ClientId: c.W, Input: regInput{op: c.Op, tok: c.Tok, val: c.Val},
			Call: c.Start, Output: regOutput{res: resUnknown}, Return: math.MaxInt64})
	}
	if len(ops) == 0 {
		return "empty"
	}
	switch porcupine.CheckOperationsTimeout(registerModel.ToModel(), ops, time.Minute) {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "illegal"
	default:
		return "unknown"
	}
}

package main

import (
	"math"
	"slices"
	"sort"
	"time"
)

// check runs every check over the workers' events. fencedFinal and
// controlFinal are the registers' values read after the run; bound is how
// long after a heal a grant must come.
func check(events []event, windows []window, fencedFinal, controlFinal int64, bound time.Duration, end int64) verdict {
	v := verdict{tally: tally{FencedFinal: fencedFinal, ControlFinal: controlFinal}, BoundMS: ms(bound)}
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
// then merged (verdict.merge). The p99 acquire is over every key's
// acquisitions.
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
		out.merge(k, check(evs, windows, fin[k].fenced, fin[k].control, bound, end))
	}
	out.RecoveryMS = ms(out.Recovery)
	var all verdict
	checkLiveness(&all, nil, attempts, windows, bound, end)
	out.AcquireP99, out.AcquireP99MS = all.AcquireP99, all.AcquireP99MS
	return out
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

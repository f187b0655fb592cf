package main

import (
	"fmt"
	"reflect"
	"time"
)

// window is one fault: injected at Inject, healed at Heal (Unix ns).
// A fault that cuts the key's primary off from its replica (failover)
// also sets Cut and CutEnd: no grant made in between can reach a replica.
type window struct {
	Inject, Heal int64
	Cut, CutEnd  int64
	// Healing is when the heal began (0: the fault has none); a heal that
	// takes long (a proxy that removes its toxics) ends at Heal.
	Healing int64
}

// tally are the verdict's counts: a run over several keys adds each up
// over the keys (add). Every field is an integer.
type tally struct {
	Sections      int `json:"sections"`       // critical sections entered (acquisitions granted)
	AcquireFailed int `json:"acquire_failed"` // acquisitions that failed or timed out
	// Safety of the fenced register: these two must be zero.
	TokenOrder   int `json:"token_order_violations"` // grants whose token is not above an earlier grant's
	FencedLost   int `json:"fenced_lost_updates"`    // acknowledged fenced increments lost
	StaleRefused int `json:"stale_refused"`          // writes the fence refused (the fence at work)
	ControlLost  int `json:"control_lost_updates"`   // the unfenced control's lost increments
	Overlaps     int `json:"overlapping_sections"`   // sections that began before an earlier one ended
	// DoubleGrants are sections granted while an earlier holder's lease
	// was still valid by that holder's own clock, and not released: the
	// store let two holders in at once. An overlap that is not one is a
	// holder that outlived its lease (paused, or descheduled), which its
	// lease told it.
	DoubleGrants int `json:"double_grants"`
	// Unreplicated are sections granted while the key's primary was cut
	// off from its replica (windows' Cut to CutEnd): a failover loses
	// them. With wait_replicas there are none.
	Unreplicated   int   `json:"unreplicated_grants"`
	FencedAcked    int   `json:"fenced_acked"`
	ControlAcked   int   `json:"control_acked"`
	FencedFinal    int64 `json:"fenced_final"`
	ControlFinal   int64 `json:"control_final"`
	FencedPending  int   `json:"fenced_pending"`
	ControlPending int   `json:"control_pending"`
}

// add adds o's counts to t, every field: a field added to tally is added
// up with the others, and one that is no integer fails its test.
func (t *tally) add(o tally) {
	sum, more := reflect.ValueOf(t).Elem(), reflect.ValueOf(o)
	for i := range sum.NumField() {
		f := sum.Field(i)
		f.SetInt(f.Int() + more.Field(i).Int())
	}
}

// slowest is how the faults' recoveries went: a run over several keys
// keeps the slowest key's (worst).
type slowest struct {
	Unrecovered int           `json:"unrecovered"` // faults after whose heal no lock was granted within the bound
	Recovery    time.Duration `json:"-"`           // the longest time from a heal to the next grant
}

// worst keeps the larger of each of s's and o's figures.
func (s *slowest) worst(o slowest) {
	s.Unrecovered = max(s.Unrecovered, o.Unrecovered)
	s.Recovery = max(s.Recovery, o.Recovery)
}

// verdict is what the checks found in one run of one store under one
// fault.
type verdict struct {
	tally
	Linearizable string `json:"linearizable"`           // porcupine: ok, illegal, unknown
	DoubleGrant  string `json:"double_grant,omitempty"` // the first of tally.DoubleGrants, described
	slowest
	RecoveryMS   float64       `json:"recovery_ms"`       // slowest.Recovery
	BoundMS      float64       `json:"recovery_bound_ms"` // the most a grant may take after a heal
	AcquireP99   time.Duration `json:"-"`
	AcquireP99MS float64       `json:"acquire_p99_during_fault_ms"`
	Example      string        `json:"example,omitempty"` // the first violation, described
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

// merge takes key k's verdict o into v, the verdict of a run over several
// keys: the counts add up, the slowest recovery and the worst
// linearizability stand, and the first violation and the first double
// grant are described, named by their key. RecoveryMS, BoundMS and the
// p99 acquire are the whole run's, which checkKeys works out over every
// key at once.
func (v *verdict) merge(k int, o verdict) {
	v.tally.add(o.tally)
	v.slowest.worst(o.slowest)
	if rank(o.Linearizable) > rank(v.Linearizable) {
		v.Linearizable = o.Linearizable
	}
	if o.Example != "" {
		v.note("key %d: %s", k, o.Example)
	}
	if o.DoubleGrant != "" && v.DoubleGrant == "" {
		v.DoubleGrant = fmt.Sprintf("key %d: %s", k, o.DoubleGrant)
	}
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

//go:build unix

package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// phaseStats are the figures of one phase. An attempt counts in the
// phase in which it began.
type phaseStats struct {
	start, end    time.Duration // since the start
	began, ended  bool
	granted       map[string]int64 // by store label
	keys          map[string]uint  // by store label: bit i set when key i was granted
	busy          int64            // not acquired: held by another instance, or in the grace
	failed        int64
	releaseFailed int64
	grantLat      []time.Duration
	failLat       []time.Duration
	firstFail     time.Duration // since the start; valid when failed > 0
	firstErr      string
	breakersOpen  time.Duration // quorum-lost: from the kill to the last breaker open
	note          string        // what happened, for the summary
}

// since is the time since the instances started.
func (o *outage) since() time.Duration { return time.Since(o.t0) }

// say writes a progress line stamped with the time since the start.
func (o *outage) say(format string, args ...any) {
	o.env.progress("redlock-outage: +%.3fs "+format, append([]any{o.since().Seconds()}, args...)...)
}

// note says what the scenario substituted, now and under the verdicts.
func (o *outage) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	o.env.progress("%s", s)
	o.env.notes = append(o.env.notes, s)
}

func (o *outage) noteAndSay(ph int, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	o.mu.Lock()
	o.stats[ph].note = s
	o.mu.Unlock()
	o.say("%s", s)
}

// begin ends the current phase, says what it did, and starts phase ph.
func (o *outage) begin(ph int, format string, args ...any) {
	now := o.since()
	o.mu.Lock()
	if ph > 0 {
		prev := &o.stats[ph-1]
		prev.end, prev.ended = now, true
	}
	o.stats[ph].start, o.stats[ph].began = now, true
	o.mu.Unlock()
	if ph > 0 {
		o.say("phase %s done: %s", outagePhaseNames[ph-1], o.figures(ph-1))
	}
	o.phase.Store(int32(ph))
	o.say("phase %s: "+format, append([]any{outagePhaseNames[ph]}, args...)...)
}

// end ends the last phase that began.
func (o *outage) end() {
	now := o.since()
	ph := int(o.phase.Load())
	o.mu.Lock()
	o.stats[ph].end = now
	// The last phase ended as planned only if the run was not cut short.
	o.stats[ph].ended = o.failedAt == ""
	o.mu.Unlock()
	o.say("phase %s done: %s", outagePhaseNames[ph], o.figures(ph))
}

// waitFor polls cond until it holds, for at most d.
func (o *outage) waitFor(ctx context.Context, d time.Duration, cond func() bool) (bool, error) {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return false, err
		}
	}
	return true, nil
}

// granted is how many locks store granted to attempts begun in phase ph.
func (o *outage) granted(ph int, store string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stats[ph].granted[store]
}

// figures says in one line what phase ph did.
func (o *outage) figures(ph int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := &o.stats[ph]
	var b strings.Builder
	o.timings(&b, st, "acquire ")
	fmt.Fprintf(&b, "; %s not acquired (held, or in the grace)", num(st.busy))
	if st.releaseFailed > 0 {
		fmt.Fprintf(&b, "; %s releases failed", num(st.releaseFailed))
	}
	return b.String()
}

// timings writes how long phase st lasted, what it granted, how long its
// grants took (after grantsWord), and how many attempts failed and how
// long they took.
func (o *outage) timings(b *strings.Builder, st *phaseStats, grantsWord string) {
	fmt.Fprintf(b, "%s: %s", fmtDur(st.end-st.start), o.grantedWords(st))
	if len(st.grantLat) > 0 {
		fmt.Fprintf(b, ", %sp50 %s p99 %s", grantsWord, fmtDur(percentile(st.grantLat, 0.5)), fmtDur(percentile(st.grantLat, 0.99)))
	}
	fmt.Fprintf(b, "; %s failed", num(st.failed))
	if st.failed > 0 {
		fmt.Fprintf(b, " in p50 %s p99 %s max %s (TTL %v)", fmtDur(percentile(st.failLat, 0.5)), fmtDur(percentile(st.failLat, 0.99)), fmtDur(slices.Max(st.failLat)), o.cfg.ttl)
	}
}

// grantedWords is "N acquisitions, by redlock 5 and postgres 7".
func (o *outage) grantedWords(st *phaseStats) string {
	var total int64
	var by []string
	for _, s := range []string{primaryLabel, o.secLabel} {
		if n := st.granted[s]; n > 0 {
			total += n
			by = append(by, s+" "+num(n))
		}
	}
	what := "acquisitions"
	if total == 1 {
		what = "acquisition"
	}
	switch {
	case total == 0:
		return "0 acquisitions"
	case len(by) == 1:
		return fmt.Sprintf("%s %s, all by %s", num(total), what, strings.Fields(by[0])[0])
	}
	return fmt.Sprintf("%s %s (%s)", num(total), what, strings.Join(by, ", "))
}

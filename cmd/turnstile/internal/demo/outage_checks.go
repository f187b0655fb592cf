//go:build unix

package demo

import (
	"errors"
	"fmt"

	"github.com/turnstilelock/turnstile/fence"
)

// outageChecks are the checks over every critical section of the run:
// its tokens, and its writes to the fenced register.
type outageChecks struct {
	sections        int64
	sectionsBy      map[string]int64 // by store label
	lateStarts      int64            // leases that ended before their critical section began
	tokenViolations int64
	firstViolation  string
	accepted        int64
	staleRefused    int64
	currentRefused  int64
	firstRefusal    string
	writeErrors     int64
	firstWriteErr   string
}

// began checks a critical section that began on key with token, granted
// by store in phase ph, against the key's last one.
func (c *outageChecks) began(key *outageKey, token uint64, store string, ph int) {
	c.sections++
	c.sectionsBy[store]++
	if token <= key.last {
		c.tokenViolations++
		if c.firstViolation == "" {
			c.firstViolation = fmt.Sprintf("%s: token %d from %s (%s) after %d from %s (%s)",
				key.name, token, store, outagePhaseNames[ph], key.last, key.lastStore, outagePhaseNames[key.lastPhase])
		}
	}
}

// wrote checks a write of the fenced register that returned err, by a
// holder whose lease was current after the write or not. A write the end
// of the run cut short (stopped) counts for nothing; refusal describes
// the write, for the first refusal of a current holder.
func (c *outageChecks) wrote(err error, current, stopped bool, refusal func() string) {
	switch {
	case err == nil:
		c.accepted++
	case errors.Is(err, fence.ErrStaleToken) && current:
		c.currentRefused++
		if c.firstRefusal == "" {
			c.firstRefusal = refusal()
		}
	case errors.Is(err, fence.ErrStaleToken):
		c.staleRefused++
	case stopped:
	default:
		countFailure(&c.writeErrors, &c.firstWriteErr, err)
	}
}

// tokens is the verdict of the token check: tokens strictly increase in
// the order critical sections begin, across the Redlock and the secondary
// (secLabel).
func (c *outageChecks) tokens(secLabel string) result {
	tokens := result{Variant: "tokens", OK: c.tokenViolations == 0 && c.sections > 0}
	by := fmt.Sprintf("%s %s and %s %s", primaryLabel, num(c.sectionsBy[primaryLabel]), secLabel, num(c.sectionsBy[secLabel]))
	switch {
	case c.tokenViolations > 0:
		tokens.Summary = fmt.Sprintf("%s of %s critical sections began with a token not above the key's last: %s", num(c.tokenViolations), num(c.sections), c.firstViolation)
	case c.sections == 0:
		tokens.Summary = "no critical section ran"
	default:
		tokens.Summary = fmt.Sprintf("%s critical sections on %d keys, tokens strictly increasing in the order they began, across both stores (%s)", num(c.sections), outageKeys, by)
	}
	if c.lateStarts > 0 {
		tokens.Summary += fmt.Sprintf("; %s leases ended before their critical section began", num(c.lateStarts))
	}
	tokens.add("critical_sections", c.sections)
	tokens.add("by_redlock", c.sectionsBy[primaryLabel])
	tokens.add("by_secondary", c.sectionsBy[secLabel])
	tokens.add("secondary", secLabel)
	tokens.add("not_increasing", c.tokenViolations)
	tokens.add("late_starts", c.lateStarts)
	if c.firstViolation != "" {
		tokens.add("first_violation", c.firstViolation)
	}
	return tokens
}

// fence is the verdict of the fence check: the register refused no write
// of a holder whose lease was current.
func (c *outageChecks) fence() result {
	fenced := result{Variant: "fence", OK: c.currentRefused == 0 && c.writeErrors == 0 && c.accepted > 0}
	switch {
	case c.currentRefused > 0:
		fenced.Summary = fmt.Sprintf("the register refused %s writes of current holders: two holders overlapped; first: %s", num(c.currentRefused), c.firstRefusal)
	case c.writeErrors > 0:
		fenced.Summary = fmt.Sprintf("%s writes to the register failed: %s", num(c.writeErrors), c.firstWriteErr)
	case c.accepted == 0:
		fenced.Summary = "no write reached the register"
	default:
		fenced.Summary = fmt.Sprintf("no two holders overlapped: the register accepted %s writes and refused none of a current holder", num(c.accepted))
	}
	fenced.Summary += fmt.Sprintf("; %s stale writes refused (leases that had ended)", num(c.staleRefused))
	fenced.add("writes_accepted", c.accepted)
	fenced.add("current_refused", c.currentRefused)
	fenced.add("stale_refused", c.staleRefused)
	fenced.add("write_errors", c.writeErrors)
	if c.firstRefusal != "" {
		fenced.add("first_refusal", c.firstRefusal)
	}
	return fenced
}

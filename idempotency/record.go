package idempotency

import (
	"fmt"
	"strconv"
	"strings"
)

// recordError is an ErrBadRecord naming the part at fault.
func recordError(part, reason string) error {
	return fmt.Errorf("%w: %s: %s", ErrBadRecord, part, reason)
}

// redisOutcome decodes v, the value the claim script found at a request's
// Redis key: claimTag and the owner of a running claim, or resultTag and
// the result.
func redisOutcome(v string) (outcome, error) {
	switch {
	case strings.HasPrefix(v, resultTag):
		return outcome{state: done, result: []byte(v[len(resultTag):])}, nil
	case strings.HasPrefix(v, claimTag):
		if len(v) == len(claimTag) {
			return outcome{}, recordError("claim owner", "empty")
		}
		return outcome{state: running}, nil
	case v == "":
		return outcome{}, recordError("tag", `empty value, want "c" (claim) or "d" (result)`)
	}
	return outcome{}, recordError("tag", fmt.Sprintf(`first byte %q, want "c" (claim) or "d" (result)`, v[0]))
}

// pgOutcome decodes a row of turnstile_idempotency as lookup.sql reads
// it, for the claim of owner: the claim is owner's, or the row expired
// (retry: claim again), or it is a running claim or a result. A running
// row needs its claim_owner, a done row its result (an empty result is
// stored empty, never NULL).
func pgOutcome(st string, result []byte, holder *string, expired bool, owner string) (o outcome, retry bool, err error) {
	switch st {
	case "running":
		switch {
		case holder == nil || *holder == "":
			return outcome{}, false, recordError("claim_owner", "missing in a running row")
		case *holder == owner:
			return outcome{state: claimed}, false, nil
		case expired:
			return outcome{}, true, nil
		}
		return outcome{state: running}, false, nil
	case "done":
		switch {
		case expired:
			return outcome{}, true, nil
		case result == nil:
			return outcome{}, false, recordError("result", "NULL in a done row")
		}
		return outcome{state: done, result: result}, false, nil
	}
	return outcome{}, false, recordError("state", describe(st)+`, want "running" or "done"`)
}

// describe quotes s if it is short printable ASCII, and otherwise only
// gives its length, so that an error stays short whatever a record holds.
func describe(s string) string {
	if len(s) > 16 {
		return fmt.Sprintf("a value of %d bytes", len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Sprintf("a value of %d bytes", len(s))
		}
	}
	return strconv.Quote(s)
}

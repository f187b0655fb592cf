package idempotency

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// checkRecordErr checks that err is an ErrBadRecord that names part, and
// is short: it names the part at fault without carrying the stored value.
func checkRecordErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if !errors.Is(err, ErrBadRecord) {
		t.Fatalf("error %v, want ErrBadRecord", err)
	}
	named := false
	for _, p := range parts {
		named = named || strings.Contains(err.Error(), ": "+p+": ")
	}
	if !named {
		t.Fatalf("error %q names none of %q", err, parts)
	}
	if len(err.Error()) > 160 {
		t.Fatalf("error of %d bytes: %q; it must not carry the stored value", len(err.Error()), err)
	}
}

// FuzzRedisRecord: the value at a request's Redis key decodes as what was
// stored — a result tag and any bytes give those bytes back (non-nil,
// even empty), a claim tag and an owner a running claim — and anything
// else fails with ErrBadRecord naming the part at fault, never with the
// value in the error.
func FuzzRedisRecord(f *testing.F) {
	f.Add([]byte(`{"receipt":"r-1"}`), "0f3a9c", "d")
	f.Add([]byte{}, "", "c")
	f.Add([]byte("c\x00d"), "x", "")
	f.Add([]byte("secret-receipt"), "o", "xsecret-receipt-with-card-4111111111111111")
	f.Fuzz(func(t *testing.T, result []byte, owner, raw string) {
		o, err := redisOutcome(resultTag + string(result))
		if err != nil || o.state != done || o.result == nil || !bytes.Equal(o.result, result) {
			t.Fatalf("result %q stored, decoded as %+v, %v", result, o, err)
		}
		o, err = redisOutcome(claimTag + owner)
		switch {
		case owner == "":
			checkRecordErr(t, err, "claim owner")
		case err != nil || o.state != running:
			t.Fatalf("claim of %q decoded as %+v, %v; want running", owner, o, err)
		}

		o, err = redisOutcome(raw)
		if err != nil {
			checkRecordErr(t, err, "tag", "claim owner")
			if strings.HasPrefix(raw, resultTag) || (strings.HasPrefix(raw, claimTag) && len(raw) > len(claimTag)) {
				t.Fatalf("%q refused: %v", raw, err)
			}
			return
		}
		switch {
		case o.state == done && strings.HasPrefix(raw, resultTag) && string(o.result) == raw[len(resultTag):]:
		case o.state == running && strings.HasPrefix(raw, claimTag) && o.result == nil:
		default:
			t.Fatalf("%q decoded as %+v", raw, o)
		}
	})
}

// FuzzPostgresRecord: a row of turnstile_idempotency decodes as the
// claim of its owner, a running claim, a result (the bytes stored, never
// NULL) or an expired row to take over; a row whose state is unknown, a
// running row without claim_owner or a done row without result fails
// with ErrBadRecord naming that column.
func FuzzPostgresRecord(f *testing.F) {
	f.Add("done", []byte("receipt"), false, "o1", false, false, false)
	f.Add("done", []byte{}, false, "o1", false, false, true)
	f.Add("done", []byte(nil), true, "o1", false, false, false)
	f.Add("running", []byte(nil), true, "o1", false, false, true)
	f.Add("running", []byte(nil), true, "", true, true, false)
	f.Add("Done", []byte("x"), false, "o1", false, false, false)
	f.Fuzz(func(t *testing.T, st string, result []byte, resultNull bool, holder string, holderNull, expired, mine bool) {
		if resultNull {
			result = nil
		} else if result == nil {
			result = []byte{}
		}
		var h *string
		if !holderNull {
			h = &holder
		}
		owner := "other-owner"
		if mine {
			owner = holder
		}
		o, retry, err := pgOutcome(st, result, h, expired, owner)
		if err != nil {
			checkRecordErr(t, err, "state", "result", "claim_owner")
			if retry || o.state != claimed || o.result != nil {
				t.Fatalf("error %v with %+v, retry %v", err, o, retry)
			}
			switch {
			case st != "running" && st != "done":
				checkRecordErr(t, err, "state")
			case st == "running" && (h == nil || holder == ""):
				checkRecordErr(t, err, "claim_owner")
			case st == "done" && !expired && result == nil:
				checkRecordErr(t, err, "result")
			default:
				t.Fatalf("row (%q, %q, %v, %v) refused: %v", st, result, h, expired, err)
			}
			return
		}
		switch {
		case st != "running" && st != "done":
			t.Fatalf("row of state %q accepted as %+v", st, o)
		case retry:
			if !expired || (st == "running" && holder == owner) {
				t.Fatalf("row (%q, expired %v, ours %v) to be taken over", st, expired, holder == owner)
			}
		case o.state == claimed:
			if st != "running" || h == nil || holder != owner {
				t.Fatalf("row (%q, holder %v) decoded as claimed by %q", st, h, owner)
			}
		case o.state == running:
			if st != "running" || expired || holder == owner {
				t.Fatalf("row (%q, expired %v, ours %v) decoded as running", st, expired, holder == owner)
			}
		case o.state == done:
			if st != "done" || expired || o.result == nil || !bytes.Equal(o.result, result) {
				t.Fatalf("row (%q, %q, expired %v) decoded as done with %q", st, result, expired, o.result)
			}
		}
	})
}

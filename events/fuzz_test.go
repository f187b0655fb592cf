package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/events"
)

// fieldNames are the JSON fields of a version-1 event.
var fieldNames = map[string]bool{
	"version": true, "id": true, "type": true, "key": true, "owner": true, "token": true,
	"validity_ms": true, "timestamp": true, "backend": true, "error": true,
}

// checkDecodeErr checks that err, an error of Decode, is a *FieldError
// matching ErrInvalidEvent whose text names its field, and that it does
// not repeat the input's values.
func checkDecodeErr(t *testing.T, in []byte, err error) *events.FieldError {
	t.Helper()
	if !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("Decode(%q) = %v, want ErrInvalidEvent", in, err)
	}
	fe, ok := errors.AsType[*events.FieldError](err)
	if !ok {
		t.Fatalf("Decode(%q) = %v (%T), want a *FieldError", in, err, err)
	}
	if fe.Reason == "" {
		t.Fatalf("Decode(%q) = %v: no reason", in, err)
	}
	if fe.Field != "" && !strings.Contains(err.Error(), "field ") {
		t.Fatalf("Decode(%q) = %v: the text does not name field %q", in, err, fe.Field)
	}
	if len(err.Error()) > 200 {
		t.Fatalf("Decode(%q): error of %d bytes: %q; it must stay short whatever the input", in, len(err.Error()), err)
	}
	return fe
}

// FuzzDecode: Decode either refuses its input with an error naming the
// field at fault, or returns a valid event that encodes back to JSON
// Decode reads as the same event.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"id":"6F2LQK3WTA7JXQ4ZQ5OV2ZB3LM","type":"ACQUIRED","key":"lock:inventory:12345","owner":"host-42/J3QHX5MZ7NWA2QJXKX4J4QHV6Y","token":1842,"validity_ms":29694,"timestamp":"2026-11-30T08:15:00.123456789Z","backend":"redis 127.0.0.1:6379"}`,
		`{"version":1,"id":"x","type":"FAILED","key":"k","timestamp":"2026-11-30T09:15:00+01:00","error":"turnstile: lock not acquired"}`,
		`{"version":7}`,
		`{"version":1,"id":"x","type":"LOST","key":"k","timestamp":"2026-11-30T08:15:00Z","Key":"other"}`,
		`{"version":1,"version":1,"id":"x","type":"LOST","key":"k","timestamp":"2026-11-30T08:15:00Z"}`,
		`{"version":1,"id":"x","type":"LOST","key":"\ud800","timestamp":"2026-11-30T08:15:00Z"}`,
		`{"version":1,"id":"x","type":"LOST","key":"k","token":-1,"timestamp":"2026-11-30T08:15:00Z"}`,
		`{"version":1,"id":null,"type":"LOST","key":"k","timestamp":"2026-11-30T08:15:00Z"}`,
		`{"version":1,"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9":1}`,
		`{"version":1,"id":"x","type":"\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001","key":"k","timestamp":"2026-11-30T08:15:00Z"}`,
		`{"version":1.0}`, `[]`, `null`, `{`, `{"version":1} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, err := events.Decode(in)
		if err != nil {
			fe := checkDecodeErr(t, in, err)
			if fe.Field != "" && fieldNames[fe.Field] && !strings.Contains(err.Error(), `"`+fe.Field+`"`) {
				t.Fatalf("Decode(%q) = %v: the text does not name field %q", in, err, fe.Field)
			}
			if ev != (events.Event{}) {
				t.Fatalf("Decode(%q) returned %+v with its error", in, ev)
			}
			return
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("Decode(%q) = %+v, which Validate refuses: %v", in, ev, err)
		}
		if ev.Timestamp.Location() != time.UTC {
			t.Fatalf("Decode(%q): timestamp in %v, want UTC", in, ev.Timestamp.Location())
		}
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("Decode(%q) = %+v, which does not encode: %v", in, ev, err)
		}
		back, err := events.Decode(out)
		if err != nil {
			t.Fatalf("Decode(%q) = %+v, encoded as %s, which Decode refuses: %v", in, ev, out, err)
		}
		if back != ev {
			t.Fatalf("Decode(%q) = %+v\nencoded %s\ndecoded %+v", in, ev, out, back)
		}
	})
}

// FuzzEventRoundTrip: an event that Validate accepts encodes to JSON that
// Decode reads back as the same event (timestamps in UTC, as New and
// FromLock make them); one Validate refuses is refused by Decode too,
// for the same field.
func FuzzEventRoundTrip(f *testing.F) {
	f.Add(1, "6F2LQK3WTA7JXQ4ZQ5OV2ZB3LM", "ACQUIRED", "lock:inventory:12345", "host-42/J3QHX5MZ7NWA2QJXKX4J4QHV6Y",
		uint64(1842), int64(29694), int64(1796026500), int64(123456789), "redis 127.0.0.1:6379", "")
	f.Add(1, "x", "FAILED", "k", "", uint64(0), int64(-5), int64(0), int64(0), "memory", "turnstile: lock not acquired")
	f.Add(2, "x", "LOST", "k\x00\xff", "o\u2028", uint64(1<<63), int64(-1<<63), int64(-62135596800), int64(1), "", "")
	f.Add(1, "x", "WAITING", "k", "", uint64(0), int64(0), int64(253402300800), int64(0), "", "")
	f.Fuzz(func(t *testing.T, version int, id, typ, key, owner string, token uint64, validity, sec, nsec int64, backend, errText string) {
		ev := events.Event{
			Version: version, ID: id, Type: typ, Key: key, Owner: owner, Token: token, ValidityMs: validity,
			Timestamp: time.Unix(sec, nsec).UTC(), Backend: backend, Error: errText,
		}
		b, merr := json.Marshal(ev)
		verr := ev.Validate()
		if verr != nil {
			if _, ok := errors.AsType[*events.FieldError](verr); !ok || !errors.Is(verr, events.ErrInvalidEvent) {
				t.Fatalf("Validate(%+v) = %v, want a *FieldError", ev, verr)
			}
			if merr != nil || strings.Contains(verr.Error(), "UTF-8") {
				return // JSON cannot carry it: encoding replaces the bad bytes
			}
			_, derr := events.Decode(b)
			fe := checkDecodeErr(t, b, derr)
			if want, _ := errors.AsType[*events.FieldError](verr); fe.Field != want.Field {
				t.Fatalf("%+v: Validate blames %q, Decode of %s blames %q (%v)", ev, want.Field, b, fe.Field, derr)
			}
			return
		}
		if merr != nil {
			t.Fatalf("Validate accepts %+v, which does not encode: %v", ev, merr)
		}
		back, err := events.Decode(b)
		if err != nil {
			t.Fatalf("Decode(%s) of a valid event: %v", b, err)
		}
		if back != ev {
			t.Fatalf("round trip of %s:\n got %+v\nwant %+v", b, back, ev)
		}
	})
}

package outbox_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/outbox"
)

// FuzzDecodeRow: a relay's decoding of a row (key column, payload) either
// returns a valid event of the row's key, which encodes to a payload
// that decodes to the same event, or refuses the row with an error that
// matches ErrInvalidEvent and names the field at fault — what the
// dead-letter table's reason column shows the operator.
func FuzzDecodeRow(f *testing.F) {
	good := `{"version":1,"id":"6F2LQK3WTA7JXQ4ZQ5OV2ZB3LM","type":"RELEASED","key":"lock:order:42","owner":"host-1/owner","token":3,"timestamp":"2026-11-30T08:15:00.123456789Z"}`
	// PostgreSQL's jsonb text form: keys sorted by length, spaces.
	jsonb := `{"id": "X", "key": "lock:order:42", "type": "LOST", "token": 18446744073709551615, "version": 1, "timestamp": "2026-11-30T08:15:00Z", "validity_ms": -1}`
	for _, s := range [][2]string{
		{"lock:order:42", good},
		{"lock:order:42", jsonb},
		{"lock:other", good},
		{"lock:bad", `{"version": 7}`},
		{"lock:bad", `{"version": 1, "id": "x", "type": "LOST", "key": "lock:bad", "timestamp": "2026-11-30T08:15:00Z", "token": 1e3}`},
		{"lock:bad", `{"version": 1, "id": "x", "type": "LOST", "key": "lock:bad", "timestamp": "2026-11-30 08:15:00"}`},
		{"", `{}`},
		{"k", `"k"`},
	} {
		f.Add(s[0], []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, key string, payload []byte) {
		ev, err := outbox.DecodeRow(key, payload)
		if err != nil {
			fe, ok := errors.AsType[*events.FieldError](err)
			if !ok || !errors.Is(err, events.ErrInvalidEvent) {
				t.Fatalf("DecodeRow(%q, %q) = %v (%T), want an *events.FieldError", key, payload, err, err)
			}
			if fe.Field != "" && !strings.Contains(err.Error(), "field ") {
				t.Fatalf("DecodeRow(%q, %q) = %v: the text does not name field %q", key, payload, err, fe.Field)
			}
			if len(err.Error()) > 200 {
				t.Fatalf("DecodeRow(%q, %q): error of %d bytes; the dead row's reason and the log line must stay short", key, payload, len(err.Error()))
			}
			if ev != (events.Event{}) {
				t.Fatalf("DecodeRow(%q, %q) returned %+v with its error", key, payload, ev)
			}
			return
		}
		if ev.Key != key {
			t.Fatalf("DecodeRow(%q, %q) = event of key %q", key, payload, ev.Key)
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("DecodeRow(%q, %q) = %+v, which Validate refuses: %v", key, payload, ev, err)
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("DecodeRow(%q, %q) = %+v, which does not encode: %v", key, payload, ev, err)
		}
		back, err := outbox.DecodeRow(key, b)
		if err != nil || back != ev {
			t.Fatalf("DecodeRow(%q, %q) = %+v\nencoded %s\ndecoded %+v, %v", key, payload, ev, b, back, err)
		}
	})
}

// FuzzAddRoundTrip: the payload Add writes for an event (its JSON) is
// decoded by the relay, under the key Add writes in the key column, as
// the same event — for every event Add accepts (Validate).
func FuzzAddRoundTrip(f *testing.F) {
	f.Add("6F2LQK3WTA7JXQ4ZQ5OV2ZB3LM", "RELEASED", "lock:order:42", "host-1/owner", uint64(3), int64(29694), int64(1796026500), int64(123456789), "", "")
	f.Add("x", "FAILED", "k\u2028\"<>&", "", uint64(0), int64(0), int64(-62135596800), int64(0), "memory", "turnstile: lock not acquired")
	f.Fuzz(func(t *testing.T, id, typ, key, owner string, token uint64, validity, sec, nsec int64, backend, errText string) {
		ev := events.Event{
			Version: events.Version, ID: id, Type: typ, Key: key, Owner: owner, Token: token, ValidityMs: validity,
			Timestamp: time.Unix(sec, nsec).UTC(), Backend: backend, Error: errText,
		}
		if ev.Validate() != nil {
			return
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("Validate accepts %+v, which does not encode: %v", ev, err)
		}
		back, err := outbox.DecodeRow(ev.Key, b)
		if err != nil || back != ev {
			t.Fatalf("row (%q, %s) decoded as %+v, %v; want %+v", ev.Key, b, back, err, ev)
		}
	})
}

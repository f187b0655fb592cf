package events_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

func decode(t testing.TB, b []byte) events.Event {
	t.Helper()
	var ev events.Event
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return ev
}

func TestFromLock(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 15, 0, 123456789, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		typ  turnstile.EventType
		want string
		ok   bool
	}{
		{turnstile.EventAcquired, events.TypeAcquired, true},
		{turnstile.EventReleased, events.TypeReleased, true},
		{turnstile.EventExtended, events.TypeExtended, true},
		{turnstile.EventLost, events.TypeLost, true},
		{turnstile.EventFailed, events.TypeFailed, true},
		{turnstile.EventWaiting, "", false},
		{turnstile.EventRenewFailed, "", false},
		{turnstile.EventType(200), "", false},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			ev, ok := events.FromLock(turnstile.Event{
				Type: tc.typ, Time: at, Backend: "memory", Key: "lock:k", Owner: "host-1/abc",
				Token: 7, Validity: 29*time.Second + 700*time.Millisecond + 999*time.Microsecond,
				Err: turnstile.ErrLockLost,
			})
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				if ev != (events.Event{}) {
					t.Fatalf("event %+v for an unconverted type", ev)
				}
				return
			}
			want := events.Event{
				Version: events.Version, ID: ev.ID, Type: tc.want, Key: "lock:k", Owner: "host-1/abc",
				Token: 7, ValidityMs: 29700, Timestamp: at.UTC(), Backend: "memory",
				Error: turnstile.ErrLockLost.Error(),
			}
			if ev != want {
				t.Fatalf("got  %+v\nwant %+v", ev, want)
			}
			if len(ev.ID) != 26 {
				t.Fatalf("id %q: want 26 base32 characters (128 random bits)", ev.ID)
			}
			if err := ev.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFromLockUniqueIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		ev, _ := events.FromLock(turnstile.Event{Type: turnstile.EventAcquired, Key: "k", Time: time.Now()})
		if seen[ev.ID] {
			t.Fatalf("id %s issued twice", ev.ID)
		}
		seen[ev.ID] = true
	}
}

// TestJSONGolden pins the version-1 JSON shape: field names, omitted empty
// fields, UTC RFC 3339 timestamps with nanoseconds.
func TestJSONGolden(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 15, 0, 123456789, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		in   turnstile.Event
	}{
		{"acquired", turnstile.Event{Type: turnstile.EventAcquired, Time: at, Backend: "redis 127.0.0.1:6379",
			Key: "lock:inventory:12345", Owner: "host-42/J3QHX5MZ7NWA2QJXKX4J4QHV6Y", Token: 1842,
			Validity: 29694 * time.Millisecond, Wait: 3 * time.Millisecond, Retries: 1}},
		{"failed", turnstile.Event{Type: turnstile.EventFailed, Time: at, Backend: "memory",
			Key: "lock:order:42", Err: turnstile.ErrNotAcquired}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, ok := events.FromLock(tc.in)
			if !ok {
				t.Fatal("not converted")
			}
			ev.ID = "6F2LQK3WTA7JXQ4ZQ5OV2ZB3LM" // random otherwise
			got, err := json.MarshalIndent(ev, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := "testdata/" + tc.name + ".golden.json"
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("JSON of %s:\n%s\nwant (%s):\n%s", tc.name, got, path, want)
			}
			if back := decode(t, want); back != ev {
				t.Fatalf("round trip: %+v, want %+v", back, ev)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := events.New(events.TypeReleased, "lock:k")
	if err := good.Validate(); err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*events.Event)
	}{
		{"version 0", func(e *events.Event) { e.Version = 0 }},
		{"version 2", func(e *events.Event) { e.Version = 2 }},
		{"no id", func(e *events.Event) { e.ID = "" }},
		{"no key", func(e *events.Event) { e.Key = "" }},
		{"no timestamp", func(e *events.Event) { e.Timestamp = time.Time{} }},
		{"unknown type", func(e *events.Event) { e.Type = "WAITING" }},
		{"lower-case type", func(e *events.Event) { e.Type = "acquired" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := good
			tc.edit(&ev)
			if err := ev.Validate(); !errors.Is(err, events.ErrInvalidEvent) {
				t.Fatalf("Validate = %v, want ErrInvalidEvent", err)
			}
		})
	}
}

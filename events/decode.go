package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// FieldError is the error of an invalid event: it names the JSON field
// at fault ("version", "id", "type", "key", "owner", "token",
// "validity_ms", "timestamp", "backend", "error", or an unknown field's
// name), or none when the value as a whole is not a JSON object. It
// matches ErrInvalidEvent under errors.Is. Its text never repeats the
// value of a field other than version and type.
type FieldError struct {
	Field  string // the JSON field; "" when the value as a whole is at fault
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "turnstile/events: invalid event: " + e.Reason
	}
	return "turnstile/events: invalid event: field " + describe(e.Field) + ": " + e.Reason
}

// describe quotes s if it is short printable ASCII, and otherwise only
// gives its length, so that an error stays short whatever the input.
func describe(s string) string {
	if len(s) > 32 {
		return fmt.Sprintf("of %d bytes", len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Sprintf("of %d bytes", len(s))
		}
	}
	return strconv.Quote(s)
}

// Is makes a FieldError match ErrInvalidEvent.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidEvent }

// Decode parses the JSON value of one event, as Publish and the outbox
// write it, and validates it (Validate). It is stricter than
// json.Unmarshal: field names must match exactly, each at most once, with
// no field that version 1 does not have and no null; the version is
// checked before anything else, so that an event of a newer version is
// reported as such. The timestamp is returned in UTC. Every error is a
// *FieldError naming the field at fault.
func Decode(b []byte) (Event, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return Event{}, &FieldError{Reason: "not JSON: " + jsonReason(err)}
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Event{}, &FieldError{Reason: "not a JSON object"}
	}
	type field struct {
		name string
		raw  json.RawMessage
	}
	var fields []field
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Event{}, &FieldError{Reason: "not JSON: " + jsonReason(err)}
		}
		name, _ := tok.(string) // an object's keys are strings
		if seen[name] {
			return Event{}, &FieldError{Field: name, Reason: "appears twice"}
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Event{}, &FieldError{Field: name, Reason: "not JSON: " + jsonReason(err)}
		}
		fields = append(fields, field{name, raw})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return Event{}, &FieldError{Reason: "not JSON: " + jsonReason(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Event{}, &FieldError{Reason: "more data after the object"}
	}

	var ev Event
	if !seen["version"] {
		return Event{}, &FieldError{Field: "version", Reason: "missing"}
	}
	for _, f := range fields {
		if f.name == "version" {
			if err := ev.setField(f.name, f.raw); err != nil {
				return Event{}, err
			}
		}
	}
	if ev.Version != Version {
		return Event{}, &FieldError{Field: "version", Reason: fmt.Sprintf("version %d, want %d", ev.Version, Version)}
	}
	for _, f := range fields {
		if f.name != "version" {
			if err := ev.setField(f.name, f.raw); err != nil {
				return Event{}, err
			}
		}
	}
	for _, name := range [...]string{"id", "type", "key", "timestamp"} {
		if !seen[name] {
			return Event{}, &FieldError{Field: name, Reason: "missing"}
		}
	}
	if err := ev.Validate(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// setField sets the field named name from its JSON value raw.
func (ev *Event) setField(name string, raw json.RawMessage) error {
	if bytes.Equal(raw, []byte("null")) {
		return &FieldError{Field: name, Reason: "null"}
	}
	var err error
	switch name {
	case "version":
		var n int64
		n, err = decodeInt(raw)
		if err == nil && (n < math.MinInt32 || n > math.MaxInt32) {
			err = errors.New("out of range")
		}
		ev.Version = int(n)
	case "id":
		err = decodeString(raw, &ev.ID)
	case "type":
		err = decodeString(raw, &ev.Type)
	case "key":
		err = decodeString(raw, &ev.Key)
	case "owner":
		err = decodeString(raw, &ev.Owner)
	case "backend":
		err = decodeString(raw, &ev.Backend)
	case "error":
		err = decodeString(raw, &ev.Error)
	case "token":
		ev.Token, err = strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			err = errors.New("want an integer from 0 to 18446744073709551615")
		}
	case "validity_ms":
		ev.ValidityMs, err = decodeInt(raw)
	case "timestamp":
		var s string
		if err = decodeString(raw, &s); err != nil {
			break
		}
		var t time.Time
		t, err = time.Parse(time.RFC3339Nano, s)
		if err != nil {
			err = errors.New("want an RFC 3339 time")
		}
		ev.Timestamp = t.UTC()
	default:
		return &FieldError{Field: name, Reason: fmt.Sprintf("unknown field (version %d has none of that name)", Version)}
	}
	if err != nil {
		return &FieldError{Field: name, Reason: err.Error()}
	}
	return nil
}

// decodeInt parses a JSON integer (no fraction, no exponent) that fits
// an int64.
func decodeInt(raw json.RawMessage) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, errors.New("want an integer from -9223372036854775808 to 9223372036854775807")
	}
	return n, nil
}

// decodeString parses a JSON string whose content is valid UTF-8:
// encoding/json would replace invalid bytes and lone surrogate escapes
// with U+FFFD, which changes the value.
func decodeString(raw json.RawMessage, dst *string) error {
	if len(raw) < 2 || raw[0] != '"' {
		return errors.New("want a string")
	}
	if !utf8.Valid(raw) {
		return errors.New("not valid UTF-8")
	}
	if loneSurrogate(raw[1 : len(raw)-1]) {
		return errors.New("holds a lone UTF-16 surrogate escape")
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return errors.New("want a string")
	}
	return nil
}

// loneSurrogate reports whether the body of a JSON string holds a \u
// escape of a UTF-16 surrogate that is not part of a pair.
func loneSurrogate(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if i+1 >= len(s) || s[i+1] != 'u' {
			i++ // a two-character escape
			continue
		}
		r, ok := hex4(s[i+2:])
		if !ok {
			return false // malformed; json.Unmarshal reports it
		}
		i += 5
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low one must follow
			if i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if lo, ok := hex4(s[i+3:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
					i += 6
					continue
				}
			}
			return true
		case utf16.IsSurrogate(r): // a low one alone
			return true
		}
	}
	return false
}

// hex4 parses the four hex digits at the start of s.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[:4]), 16, 32)
	return rune(n), err == nil
}

// jsonReason is a JSON syntax error's text, with the byte offset but
// without the input.
func jsonReason(err error) string {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return "malformed"
}

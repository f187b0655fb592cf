package outbox

import "github.com/turnstilelock/turnstile/events"

// decodeRow decodes the payload of an outbox row whose key column is key:
// a valid event (events.Decode) of that key. Its errors are
// *events.FieldError values naming the field at fault.
func decodeRow(key string, payload []byte) (events.Event, error) {
	ev, err := events.Decode(payload)
	if err != nil {
		return events.Event{}, err
	}
	if ev.Key != key {
		return events.Event{}, &events.FieldError{Field: "key", Reason: "differs from the row's key column"}
	}
	return ev, nil
}

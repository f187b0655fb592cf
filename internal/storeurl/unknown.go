package storeurl

import (
	"fmt"
	"net/url"
)

// Unknown is the error for the query parameter name of q, which the
// parser does not know: it names the parameter, with hint in
// parentheses, and not its value, which may be a misspelt secret
// (pasword=…). It hands every parameter of q that known does not name
// to package redact (a redact.Holder), which masks their values in any
// message around it, such as the URL that Form.Read's error and
// turnstile.Open's repeat.
func Unknown[V any](q url.Values, known map[string]V, name, hint string) error {
	e := &unknownError{name: name, hint: hint, params: url.Values{}}
	for n, vals := range q {
		if _, ok := known[n]; !ok {
			e.params[n] = vals
		}
	}
	return e
}

// unknownError is an unknown query parameter.
type unknownError struct {
	name, hint string
	params     url.Values // every unknown parameter: the values never shown
}

func (e *unknownError) Error() string {
	return fmt.Sprintf("unknown query parameter %q (%s)", e.name, e.hint)
}

// HeldParams makes the error a redact.Holder.
func (e *unknownError) HeldParams() url.Values { return e.params }

package driver

import (
	"fmt"
	"reflect"
)

// Name is how b describes itself in errors and metrics: its Name if it
// is a Namer, its type otherwise.
func Name(b Backend) string {
	if n, ok := b.(Namer); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", b)
}

// IsNil reports whether b is nil, or an interface holding a nil pointer,
// map, slice, func or channel: a backend no method can be called on.
func IsNil(b Backend) bool {
	if b == nil {
		return true
	}
	v := reflect.ValueOf(b)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// Same reports whether a and b are one backend value. Unlike a == b it
// never panics: values of incomparable types are never the same.
func Same(a, b Backend) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && (ta == nil || ta.Comparable()) && a == b
}

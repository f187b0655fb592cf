package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"unicode/utf8"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// ErrQuery marks a request of the page that cannot be served as asked.
var ErrQuery = errors.New("bad request")

// Bounds of a request.
const (
	defaultPageSize = 50
	maxPageSize     = 500
	// maxKey is the longest key or prefix the page passes on (the API's
	// own limit is shorter, and says so).
	maxKey = 4096
	// maxPermits bounds a semaphore's permits as the store's drivers do.
	maxPermits = 1 << 20
)

// kinds are the kinds' names in the page's requests and answers.
var kinds = map[string]v1.Kind{
	"lock": v1.Kind_KIND_LOCK, "shared": v1.Kind_KIND_SHARED, "exclusive": v1.Kind_KIND_EXCLUSIVE,
	"semaphore": v1.Kind_KIND_SEMAPHORE, "fair": v1.Kind_KIND_FAIR, "reentrant": v1.Kind_KIND_REENTRANT,
}

func kindName(k v1.Kind) string {
	for n, v := range kinds {
		if v == k {
			return n
		}
	}
	return "lock"
}

// listQuery is what the lock list asks for: a page of the locks under a
// prefix, of one kind.
type listQuery struct {
	Prefix  string
	Kind    v1.Kind
	Permits uint32
	Page    int
	Size    int
}

// parseListQuery reads /ui/api/locks?prefix=P&kind=K&permits=N&page=I&size=S.
func parseListQuery(q url.Values) (listQuery, error) {
	l := listQuery{Kind: v1.Kind_KIND_LOCK, Size: defaultPageSize}
	for name, vals := range q {
		if len(vals) != 1 {
			return l, fmt.Errorf("%w: %s given %d times", ErrQuery, clip(name), len(vals))
		}
		switch name {
		case "prefix", "kind", "permits", "page", "size":
		default:
			return l, fmt.Errorf("%w: unknown parameter %s", ErrQuery, clip(name))
		}
	}
	var err error
	if l.Prefix, err = checkKey("prefix", q.Get("prefix"), true); err != nil {
		return l, err
	}
	if l.Kind, l.Permits, err = parseKind(q.Get("kind"), q.Get("permits")); err != nil {
		return l, err
	}
	if s := q.Get("page"); s != "" {
		if l.Page, err = strconv.Atoi(s); err != nil || l.Page < 0 || l.Page > maxWindow {
			return l, fmt.Errorf("%w: page %s: want a number from 0 to %d", ErrQuery, clip(s), maxWindow)
		}
	}
	if s := q.Get("size"); s != "" {
		if l.Size, err = strconv.Atoi(s); err != nil || l.Size < 1 || l.Size > maxPageSize {
			return l, fmt.Errorf("%w: size %s: want a number from 1 to %d", ErrQuery, clip(s), maxPageSize)
		}
	}
	return l, nil
}

// parseKind reads a kind's name and, for a semaphore, its permits.
func parseKind(name, permits string) (v1.Kind, uint32, error) {
	k := v1.Kind_KIND_LOCK
	if name != "" {
		var ok bool
		if k, ok = kinds[name]; !ok {
			return 0, 0, fmt.Errorf("%w: kind %s: want lock, shared, exclusive, semaphore, fair or reentrant", ErrQuery, clip(name))
		}
	}
	if k != v1.Kind_KIND_SEMAPHORE {
		if permits != "" {
			return 0, 0, fmt.Errorf("%w: permits given for kind %s: only a semaphore has permits", ErrQuery, kindName(k))
		}
		return k, 0, nil
	}
	n, err := strconv.Atoi(permits)
	if err != nil || n < 1 || n > maxPermits {
		return 0, 0, fmt.Errorf("%w: permits %s: a semaphore needs a number from 1 to %d", ErrQuery, clip(permits), maxPermits)
	}
	return k, uint32(n), nil
}

// checkKey refuses a key the page would not pass on: too long, not
// UTF-8 (the API's JSON could not carry it), or empty unless allowed.
func checkKey(what, s string, emptyOK bool) (string, error) {
	switch {
	case s == "" && !emptyOK:
		return "", fmt.Errorf("%w: %s is empty", ErrQuery, what)
	case len(s) > maxKey:
		return "", fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrQuery, what, len(s), maxKey)
	case !utf8.ValidString(s):
		return "", fmt.Errorf("%w: %s is not UTF-8", ErrQuery, what)
	}
	return s, nil
}

// parseKeyQuery reads /ui/api/lock?key=K&kind=K&permits=N.
func parseKeyQuery(q url.Values) (forceQuery, error) {
	for name, vals := range q {
		if len(vals) != 1 {
			return forceQuery{}, fmt.Errorf("%w: %s given %d times", ErrQuery, clip(name), len(vals))
		}
		switch name {
		case "key", "kind", "permits":
		default:
			return forceQuery{}, fmt.Errorf("%w: unknown parameter %s", ErrQuery, clip(name))
		}
	}
	var f forceQuery
	var err error
	if f.Key, err = checkKey("key", q.Get("key"), false); err != nil {
		return forceQuery{}, err
	}
	if f.Kind, f.Permits, err = parseKind(q.Get("kind"), q.Get("permits")); err != nil {
		return forceQuery{}, err
	}
	return f, nil
}

// forceQuery names one key's lock: a key, its kind and permits.
type forceQuery struct {
	Key     string
	Kind    v1.Kind
	Permits uint32
}

// forceBody is the JSON a force unlock sends.
type forceBody struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"`
	Permits string `json:"permits"`
	Confirm string `json:"confirm"`
}

// parseForce reads a force unlock's body: one JSON object, no unknown
// fields, the key confirmed.
func parseForce(data []byte) (forceQuery, error) {
	var b forceBody
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return forceQuery{}, fmt.Errorf("%w: the body is not a force unlock's JSON object: %s", ErrQuery, clip(err.Error()))
	}
	if dec.More() {
		return forceQuery{}, fmt.Errorf("%w: the body holds more than one JSON value", ErrQuery)
	}
	var f forceQuery
	var err error
	if f.Key, err = checkKey("key", b.Key, false); err != nil {
		return forceQuery{}, err
	}
	if b.Confirm != b.Key {
		return forceQuery{}, fmt.Errorf("%w: the confirmation is not the key: type the key to unlock it", ErrQuery)
	}
	if f.Kind, f.Permits, err = parseKind(b.Kind, b.Permits); err != nil {
		return forceQuery{}, err
	}
	return f, nil
}

// clip shortens what a request said for an error message.
func clip(s string) string {
	const n = 64
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strconv.Quote(s)
}

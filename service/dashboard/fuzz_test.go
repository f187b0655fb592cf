package dashboard

import (
	"errors"
	"net/url"
	"testing"
)

func FuzzParseForce(f *testing.F) {
	for _, s := range []string{`{"key":"a","confirm":"a"}`, `{"key":"a","confirm":"a","kind":"semaphore","permits":"3"}`, `{"key":1}`, `[]`, ``, `{"key":"\u0000","confirm":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := parseForce(data)
		if err != nil {
			if !errors.Is(err, ErrQuery) {
				t.Fatalf("%v does not match ErrQuery", err)
			}
			return
		}
		if q.Key == "" || len(q.Key) > maxKey {
			t.Fatalf("accepted key %q", q.Key)
		}
	})
}

func FuzzParseListQuery(f *testing.F) {
	for _, s := range []string{"", "prefix=orders:&page=2&size=10", "kind=semaphore&permits=4", "page=-1", "prefix=%ff", "a=b&a=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseListQuery(v)
		if err != nil {
			if !errors.Is(err, ErrQuery) {
				t.Fatalf("%v does not match ErrQuery", err)
			}
			return
		}
		if q.Size < 1 || q.Size > maxPageSize || q.Page < 0 || len(q.Prefix) > maxKey {
			t.Fatalf("accepted %+v", q)
		}
	})
}

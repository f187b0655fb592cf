package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func post(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/write", strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// TestStaleWriteRefused: a write with a token below the last accepted one
// is refused, naming both tokens, and the register keeps the newer value.
func TestStaleWriteRefused(t *testing.T) {
	h := newRegister().handler()
	if code, body := post(t, h, `{"resource":"order:42","token":7,"value":"old holder"}`); code != http.StatusOK {
		t.Fatalf("first write: %d %s", code, body)
	}
	if code, body := post(t, h, `{"resource":"order:42","token":9,"value":"new holder"}`); code != http.StatusOK {
		t.Fatalf("newer write: %d %s", code, body)
	}
	code, body := post(t, h, `{"resource":"order:42","token":7,"value":"late write"}`)
	if code != http.StatusConflict || !strings.Contains(body, `"token":7`) || !strings.Contains(body, `"last":9`) {
		t.Fatalf("late write: %d %s; want 409 naming tokens 7 and 9", code, body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/read?resource=order:42", nil))
	if !strings.Contains(rec.Body.String(), `"value":"new holder"`) || !strings.Contains(rec.Body.String(), `"token":9`) {
		t.Fatalf("read: %s; want the newer holder's value and token", rec.Body.String())
	}
}

// TestBadWritesRefused: malformed bodies get a 400 with the form they want.
func TestBadWritesRefused(t *testing.T) {
	h := newRegister().handler()
	for _, body := range []string{``, `{`, `[]`, `{"resource":"r","token":-1}`, `{"resource":"r","token":0,"value":"v"}`,
		`{"resource":"","token":1}`, `{"resource":"r","token":1,"extra":1}`, `{"resource":"r","token":"1"}`} {
		if code, out := post(t, h, body); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s; want 400", body, code, out)
		}
	}
}

func FuzzWrite(f *testing.F) {
	f.Add(`{"resource":"order:42","token":7,"value":"v"}`)
	f.Add(`{"resource":"","token":0}`)
	f.Add(`{"token":18446744073709551615,"resource":"r"}`)
	f.Fuzz(func(t *testing.T, body string) {
		h := newRegister().handler()
		code, out := post(t, h, body)
		if code != http.StatusOK && code != http.StatusBadRequest && code != http.StatusConflict {
			t.Fatalf("%q: status %d %s", body, code, out)
		}
	})
}

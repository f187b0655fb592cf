package service_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
	"github.com/turnstilelock/turnstile/service/apierr"
)

// post sends body as JSON to the instance's method over HTTP/1.1, as curl
// does, and returns the status, the Turnstile-Reason header and the
// decoded answer.
func post(t *testing.T, addr, method, body string) (int, string, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Fatalf("answered over HTTP/%d, want HTTP/1.1", resp.ProtoMajor)
	}
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s answered %q: %v", method, data, err)
	}
	return resp.StatusCode, resp.Header.Get(apierr.Header), out
}

// TestJSONOverHTTP1: the calls of docs/service.md's curl session, as
// curl makes them — JSON over HTTP/1.1 — with their answers, statuses
// and reasons.
func TestJSONOverHTTP1(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	const locks = "turnstile.v1.Locks/"

	code, _, got := post(t, in.addr, locks+"TryAcquire", `{"key":"orders:42","ttl":"10s"}`)
	if code != 200 {
		t.Fatalf("TryAcquire: %d %v", code, got)
	}
	lease := got["lease"].(map[string]any)
	if lease["key"] != "orders:42" || lease["token"] == "" || lease["owner"] == "" || got["ttl"] != "10s" {
		t.Fatalf("TryAcquire = %v", got)
	}
	handle, _ := json.Marshal(lease)

	code, reason, got := post(t, in.addr, locks+"TryAcquire", `{"key":"orders:42"}`)
	if code != http.StatusConflict || reason != "NOT_ACQUIRED" || got["code"] != "aborted" {
		t.Fatalf("TryAcquire of a held key: %d %s %v; want 409, NOT_ACQUIRED, aborted", code, reason, got)
	}
	code, reason, got = post(t, in.addr, locks+"Acquire", `{"key":"orders:42","wait":"0.2s"}`)
	if code != http.StatusConflict || reason != "NOT_ACQUIRED" {
		t.Fatalf("Acquire of a held key for 200ms: %d %s %v; want 409, NOT_ACQUIRED", code, reason, got)
	}
	code, _, got = post(t, in.addr, locks+"Status", `{"key":"orders:42"}`)
	st := got["state"].(map[string]any)
	if code != 200 || st["held"] != true || st["holders"].([]any)[0].(map[string]any)["owner"] != lease["owner"] {
		t.Fatalf("Status: %d %v", code, got)
	}
	code, _, got = post(t, in.addr, locks+"Extend", `{"lease":`+string(handle)+`,"ttl":"20s"}`)
	if code != 200 || got["ttl"] != "20s" {
		t.Fatalf("Extend: %d %v", code, got)
	}
	code, _, got = post(t, in.addr, locks+"Release", `{"lease":`+string(handle)+`}`)
	if code != 200 {
		t.Fatalf("Release: %d %v", code, got)
	}
	code, reason, _ = post(t, in.addr, locks+"Release", `{"lease":`+string(handle)+`}`)
	if code != http.StatusBadRequest || reason != "NOT_HELD" {
		t.Fatalf("second Release: %d %s; want 400 (failed_precondition), NOT_HELD", code, reason)
	}
	code, reason, got = post(t, in.addr, locks+"TryAcquire", `{"key":""}`)
	if code != http.StatusBadRequest || reason != "INVALID_KEY" {
		t.Fatalf("TryAcquire of an empty key: %d %s %v", code, reason, got)
	}
	code, reason, _ = post(t, in.addr, locks+"TryAcquire", `{"key":"k","ttl":"0.001s"}`)
	if code != http.StatusBadRequest || reason != "INVALID_TTL" {
		t.Fatalf("TryAcquire with a 1ms TTL: %d %s", code, reason)
	}
	code, _, got = post(t, in.addr, locks+"Acquire", `{"key":"orders:42"}`)
	if code != 200 || got["lease"].(map[string]any)["token"] == lease["token"] {
		t.Fatalf("Acquire of the free key: %d %v", code, got)
	}
}

// envelope frames msg as a Connect stream message.
func envelope(msg string) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// holdJSON opens a Hold stream in Connect's JSON streaming form over
// HTTP/1.1 (what curl sends with the envelope of docs/service.md) and
// returns a reader of its messages and the response to close.
func holdJSON(t *testing.T, addr, body string) (func() map[string]any, io.Closer) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/turnstile.v1.Locks/Hold", bytes.NewReader(envelope(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	r := bufio.NewReader(resp.Body)
	return func() map[string]any {
		t.Helper()
		head := make([]byte, 5)
		if _, err := io.ReadFull(r, head); err != nil {
			t.Fatalf("reading a message: %v", err)
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		return m
	}, resp.Body
}

// TestHoldOverHTTP1JSON: a Hold stream in JSON over HTTP/1.1 gets the
// grant at once and renewals after it, for longer than the TTL; hanging
// up releases the lock at once, long before its TTL would have.
func TestHoldOverHTTP1JSON(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	read, body := holdJSON(t, in.addr, `{"key":"job:renewed","ttl":"0.6s"}`)
	if m := read(); m["granted"] == nil {
		t.Fatalf("first message %v, want granted", m)
	}
	for i := range 4 { // over 2 TTLs: held all along
		if m := read(); m["renewed"] == nil {
			t.Fatalf("message %d: %v, want renewed", i+2, m)
		}
	}
	if code, _, got := post(t, in.addr, "turnstile.v1.Locks/TryAcquire", `{"key":"job:renewed"}`); code != http.StatusConflict {
		t.Fatalf("TryAcquire while held: %d %v", code, got)
	}
	_ = body.Close()

	const ttl = 60 * time.Second
	read, body = holdJSON(t, in.addr, `{"key":"job:released","ttl":"60s"}`)
	if m := read(); m["granted"] == nil {
		t.Fatalf("first message %v, want granted", m)
	}
	_ = body.Close() // hang up
	start := time.Now()
	for {
		code, _, got := post(t, in.addr, "turnstile.v1.Locks/Status", `{"key":"job:released"}`)
		if code == 200 && got["state"].(map[string]any)["held"] == nil {
			return
		}
		if time.Since(start) > ttl/2 {
			t.Fatalf("the lock is still held %v after the client hung up: %v", time.Since(start), got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package service_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
)

// unaryMethods are the API's unary calls, which take a request body as
// it comes off the network.
var unaryMethods = []string{
	"turnstile.v1.Locks/TryAcquire", "turnstile.v1.Locks/Acquire",
	"turnstile.v1.Locks/Extend", "turnstile.v1.Locks/Release",
	"turnstile.v1.Locks/Status", "turnstile.v1.Locks/List",
	"turnstile.v1.Locks/ForceRelease", "turnstile.v1.Locks/Info",
	"turnstile.v1.Locks/Batch", "turnstile.v1.Elections/Leader",
	"turnstile.v1.Elections/Resign",
}

// FuzzAPI sends any body, as JSON or as protobuf, to every unary call of
// an instance over HTTP/1.1: each gets an answer — the call's result or
// a clear error with its code — never a dropped connection (a handler's
// panic) nor an internal error.
func FuzzAPI(f *testing.F) {
	in := startInstance(f, service.Config{Backend: memory.New()})
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range unaryMethods {
		for _, body := range []string{
			`{}`, `{"key":"k"}`, `{"key":"k","ttl":"10s","wait":"1s"}`,
			`{"lease":{"key":"k","owner":"o","token":"1"}}`, `{"prefix":"","limit":5}`,
			`{"ops":[{"tryAcquire":{"key":"a"}},{"release":{"lease":{"key":"a","owner":"x"}}}]}`,
			`{"key":"k","kind":"KIND_SEMAPHORE","permits":0}`, `{"key":"` + "\xff" + `"}`, `[`, ``,
		} {
			f.Add(uint8(i), false, []byte(body))
		}
		f.Add(uint8(i), true, []byte{0x0a, 0x01, 'k'})
	}
	f.Fuzz(func(t *testing.T, method uint8, binary bool, body []byte) {
		m := unaryMethods[int(method)%len(unaryMethods)]
		req, err := http.NewRequest("POST", "http://"+in.addr+"/"+m, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if binary {
			req.Header.Set("Content-Type", "application/proto")
		}
		// An Acquire may wait: the call's deadline bounds it.
		req.Header.Set("Connect-Timeout-Ms", "200")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s with %q: no answer: %v", m, body, err)
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s with %q: the answer broke off: %v", m, body, err)
		}
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("%s with %q: %d %s", m, body, resp.StatusCode, answer)
		}
	})
}

package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/idempotency"
)

// mustNotRun is an fn that fails the test if it runs.
func mustNotRun(t *testing.T) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		t.Error("fn ran on a record the store could not read")
		return nil, nil
	}
}

// TestBadRecordRedis: a request's Redis key holding something this
// package did not write makes Do fail with ErrBadRecord naming the part
// at fault — not wait for a claim that is none, not replay, not run fn —
// and the error does not carry the value.
func TestBadRecordRedis(t *testing.T) {
	client := newRueidis(t)
	s, err := idempotency.NewRedis(client)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, value, part string }{
		{"claim without owner", "c", "claim owner"},
		{"unknown tag", "xsecret-receipt-4111111111111111", "tag"},
		{"empty", "", "tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 10*time.Second)
			k := key(t, "bad")
			if err := client.Do(ctx, client.B().Set().Key(idempotency.RedisKeyPrefix+k).Value(tc.value).Px(time.Minute).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			res, replayed, err := s.Do(ctx, k, mustNotRun(t))
			if !errors.Is(err, idempotency.ErrBadRecord) || !strings.Contains(err.Error(), ": "+tc.part+": ") {
				t.Fatalf("Do = %q, %v, %v; want ErrBadRecord naming %q", res, replayed, err, tc.part)
			}
			if res != nil || replayed || strings.Contains(err.Error(), "secret") {
				t.Fatalf("Do = %q, %v, %v", res, replayed, err)
			}
		})
	}
}

// TestBadRecordPostgres: a row of turnstile_idempotency that Do could not
// have written — a result row whose result is NULL, a running row
// without an owner — makes Do fail with ErrBadRecord naming the column,
// rather than replay nothing as a result or report a claim nobody holds.
func TestBadRecordPostgres(t *testing.T) {
	pool := newPool(t)
	s, err := idempotency.NewPostgres(pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, state, column string }{
		{"done without result", "done", "result"},
		{"running without owner", "running", "claim_owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 10*time.Second)
			k := key(t, "bad")
			if _, err := pool.Exec(ctx, `INSERT INTO turnstile_idempotency (key, state, result, claim_owner, expires_at)
				VALUES ($1, $2, NULL, NULL, clock_timestamp() + interval '1 hour')`, k, tc.state); err != nil {
				t.Fatal(err)
			}
			res, replayed, err := s.Do(ctx, k, mustNotRun(t))
			if !errors.Is(err, idempotency.ErrBadRecord) || !strings.Contains(err.Error(), ": "+tc.column+": ") {
				t.Fatalf("Do = %q, %v, %v; want ErrBadRecord naming %q", res, replayed, err, tc.column)
			}
			var re *idempotency.RequestError
			if !errors.As(err, &re) || re.Op != "claim" || re.Key != k {
				t.Fatalf("Do = %v, want a RequestError of claim %q", err, k)
			}
		})
	}
}

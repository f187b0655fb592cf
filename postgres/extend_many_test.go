package postgres_test

import (
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

func TestExtendMany(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	be := dial(t, srv)
	for _, k := range []string{"em-held", "em-evicted", "em-other"} {
		if _, ok, err := be.Acquire(ctx, k, "o", 2*time.Second); err != nil || !ok {
			t.Fatalf("acquire %s: %v %v", k, ok, err)
		}
	}
	if _, err := sqlConn(t, srv).Exec(ctx, `UPDATE turnstile_locks SET owner = '', expires_at = '-infinity' WHERE key = 'em-evicted'`); err != nil {
		t.Fatal(err)
	}
	res := be.ExtendMany(ctx, []driver.ExtendRequest{
		{Key: "em-held", Owner: "o", TTL: time.Minute},
		{Key: "em-evicted", Owner: "o", TTL: time.Minute},
		{Key: "em-never", Owner: "o", TTL: time.Minute},
		{Key: "em-other", Owner: "not-o", TTL: time.Minute},
	})
	want := []bool{true, false, false, false}
	for i, r := range res {
		if r.Err != nil || r.OK != want[i] {
			t.Errorf("result %d = %+v, want OK=%v", i, r, want[i])
		}
	}
	// The evicted key's advisory lock went with the refused renewal.
	if _, ok, err := dial(t, srv).Acquire(ctx, "em-evicted", "p", time.Second); err != nil || !ok {
		t.Fatalf("acquire the evicted key from another backend: %v %v", ok, err)
	}
	// The renewed key outlives its first TTL.
	time.Sleep(2100 * time.Millisecond)
	if ok, err := be.Extend(ctx, "em-held", "o", time.Second); err != nil || !ok {
		t.Fatalf("extend the renewed key after its first TTL: %v %v", ok, err)
	}
}

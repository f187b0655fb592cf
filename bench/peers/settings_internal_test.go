package peers

import (
	"context"
	"testing"
	"time"
)

// redislock waits RedislockRetry between attempts, every time: a linear
// backoff, whose retries end only with the context.
func TestRedislockRetry(t *testing.T) {
	lk, err := Redislock().Open(context.Background(), []string{"127.0.0.1:1"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	s := lk.(*redislockLocker).opts.RetryStrategy
	for range 100 {
		if d := s.NextBackoff(); d != time.Millisecond {
			t.Fatalf("NextBackoff = %v, want 1ms every time", d)
		}
	}
}

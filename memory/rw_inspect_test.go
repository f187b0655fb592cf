package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
)

// TestReadWriteInspect: through a Client, either side of a read-write
// lock shows its writer or its readers with their tokens, lists the keys
// held, and removes every holder by force while a waiting writer's claim
// stays.
func TestReadWriteInspect(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	read, write, err := turnstile.ReadWrite(store)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := turnstile.New(read)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := turnstile.New(write)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := wc.Inspect(ctx, "k"); err != nil || st.Held {
		t.Fatalf("Inspect of a free key = %+v, %v", st, err)
	}
	var last uint64
	for _, o := range []string{"r1", "r2"} {
		tok, ok, err := read.Acquire(ctx, "k", o, time.Minute)
		if !ok || err != nil {
			t.Fatalf("read lock of %s: %v, %v", o, ok, err)
		}
		last = tok
	}
	if _, ok, err := write.Acquire(ctx, "k", "w", time.Minute); ok || err != nil {
		t.Fatalf("write lock while read = %v, %v; want refused, leaving a claim", ok, err)
	}
	st, err := wc.Inspect(ctx, "k")
	if err != nil || !st.Held || len(st.Holders) != 2 || st.Holders[0].Owner != "r1" || st.Holders[1].Owner != "r2" ||
		st.Token != last || st.Holders[0].TTL <= 0 {
		t.Fatalf("Inspect = %+v, %v; want readers r1 and r2, last token %d", st, err, last)
	}
	if list, more, err := rc.List(ctx, "", 10); err != nil || more || len(list) != 1 || list[0].Key != "k" {
		t.Fatalf("List = %+v, %v, %v; want k", list, more, err)
	}
	fr, err := rc.ForceRelease(ctx, "k")
	if err != nil || !fr.Held || len(fr.Holders) != 2 || fr.Token < last {
		t.Fatalf("ForceRelease = %+v, %v; want both readers and a floor of at least %d", fr, err, last)
	}
	if ok, err := read.Extend(ctx, "k", "r1", time.Minute); ok || err != nil {
		t.Fatalf("Extend of a removed reader = %v, %v; want false", ok, err)
	}
	if _, ok, err := read.Acquire(ctx, "k", "r3", time.Minute); ok || err != nil {
		t.Fatalf("a new reader while the writer's claim stands = %v, %v; want refused", ok, err)
	}
	tok, ok, err := write.Acquire(ctx, "k", "w", time.Minute)
	if !ok || err != nil || tok <= fr.Token {
		t.Fatalf("the waiting writer = %d, %v, %v; want the lock with a token above %d", tok, ok, err, fr.Token)
	}
	if st, err := rc.Inspect(ctx, "k"); err != nil || len(st.Holders) != 1 || st.Holders[0].Owner != "w" || st.Holders[0].Token != tok {
		t.Fatalf("Inspect = %+v, %v; want the writer", st, err)
	}
	if fr, err := wc.ForceRelease(ctx, "k"); err != nil || len(fr.Holders) != 1 {
		t.Fatalf("ForceRelease of the writer = %+v, %v", fr, err)
	}
	if ok, err := write.Extend(ctx, "k", "w", time.Minute); ok || err != nil {
		t.Fatalf("Extend of the removed writer = %v, %v; want false", ok, err)
	}
}

// TestFairListCountsWaiters: the fair view lists each lock with its
// queue's length, as its Inspect shows it.
func TestFairListCountsWaiters(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memory.New()
	v, err := turnstile.Fair(store)
	if err != nil {
		t.Fatal(err)
	}
	fair := v.(*memory.Fair)
	if _, ok, err := fair.Acquire(ctx, "k", "holder", time.Minute); !ok || err != nil {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = fair.AcquireWait(ctx, "k", "waiter", time.Minute)
	}()
	for fair.Waiting("k") != 1 {
		time.Sleep(time.Millisecond)
	}
	list, _, err := fair.List(ctx, "", 10)
	if err != nil || len(list) != 1 || list[0].Waiters != 1 {
		t.Fatalf("List = %+v, %v; want k with 1 waiter", list, err)
	}
	cancel()
	<-done
}

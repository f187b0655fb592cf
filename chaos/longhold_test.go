package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// TestLongHoldEndsBeforeLockDelay: in a lock-delay cell the paused
// holder's late write must land while its lock still stands, TTL + delay
// from its grant, with 2 s to spare; a hold of TTL + delay wrote just as
// the delay ended, and the worker granted the lock then lost its
// increment on the unfenced control register. Every long hold still
// outlasts its fault.
func TestLongHoldEndsBeforeLockDelay(t *testing.T) {
	for _, ttl := range []time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second} {
		for name, f := range faults() {
			if !f.long {
				continue
			}
			hold, length := f.longHold(ttl), f.length(ttl)
			if hold <= length {
				t.Errorf("%s at TTL %v: long hold %v does not outlast the fault (%v)", name, ttl, hold, length)
			}
			if d := f.delay(ttl); d > 0 && hold > ttl+d-2*time.Second {
				t.Errorf("%s at TTL %v: long hold %v ends less than 2 s before TTL + lock delay (%v): the late write may follow the next grant", name, ttl, hold, ttl+d)
			}
		}
	}
}

// stallAfterHold is a worker's stdout that stalls for stall right after
// the hold event is written, as a holder does that the runner stops
// (SIGSTOP) as soon as it reads the event.
type stallAfterHold struct {
	stall time.Duration
	out   bytes.Buffer
}

func (s *stallAfterHold) Write(b []byte) (int, error) {
	s.out.Write(b)
	if bytes.Contains(b, []byte(`"ev":"hold"`)) {
		time.Sleep(s.stall)
	}
	return len(b), nil
}

// TestLongHoldEndFixedBeforeItsEvent: a holder stopped right after it
// announced its long hold writes when the hold was planned to end, or at
// once when it resumes later: the stop does not push its writes a whole
// hold later. Before, the hold counted from after the event, so a stop
// that landed first made the paused holder of a lock-delay cell write a
// pause after its lock delay had ended.
func TestLongHoldEndFixedBeforeItsEvent(t *testing.T) {
	srv, err := redisproc.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = time.Second
	client, err := turnstile.Open(ctx, srv.URL(), turnstile.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reg, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	guard, err := fence.NewRedis(reg, fence.AllowSameToken())
	if err != nil {
		t.Fatal(err)
	}

	// The stop (stall) and the hold are as long as each other: a hold
	// counted from after the event would end at their sum, one counted
	// from before at the larger, which leaves a hold's worth of time for
	// descheduling.
	const stall, hold = 1500 * time.Millisecond, 1500 * time.Millisecond
	w := &stallAfterHold{stall: stall}
	cfg := workerConfig{ID: 1, Key: "longhold", TTL: ttl, Hold: time.Millisecond, LongHold: hold, AcquireTimeout: 3 * ttl}
	var long atomic.Bool
	long.Store(true)
	section(ctx, cfg, cfg.Key, client, reg, guard, laneOut{r: &reporter{w: bufio.NewWriter(w), id: 1}}, 1, &long)

	var held, wrote int64
	sc := bufio.NewScanner(&w.out)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		switch {
		case e.Ev == evHold && e.Op == "long":
			held = e.Start
		case e.Ev == evCall && e.Op == evCWrite:
			wrote = e.Start
		}
	}
	if held == 0 || wrote == 0 {
		t.Fatalf("no long hold or no control write among the events:\n%s", w.out.String())
	}
	if took := time.Duration(wrote - held); took < hold || took >= stall+hold {
		t.Errorf("the control write came %v after the hold event, want from %v (the hold) to under %v (the stop and the hold after it)", took, hold, stall+hold)
	}
}

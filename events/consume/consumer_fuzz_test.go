package consume

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstilelock/turnstile/events"
)

// fenceRun feeds recs to a consumer holding maxKeys keys, whose
// application stores positions in a map, and returns the ids applied in
// order. It fails the test if the consumer applies an event whose
// position is not after the key's stored one, or one with a token
// twice.
func fenceRun(t *testing.T, maxKeys int, recs []*kgo.Record) []string {
	pos := map[string]Position{}
	seen := map[string]bool{}
	var applied []string
	cfg := defaults()
	cfg.onError = func(error) {}
	c := &Consumer{cfg: cfg, keys: newKeyCache(maxKeys),
		last: func(_ context.Context, key string) (Position, error) { return pos[key], nil }}
	h := func(_ context.Context, ev events.Event) error {
		// An event without a token is deduplicated only while its id is
		// among the last few its key applied: best effort.
		if seen[ev.ID] && ev.Token != 0 {
			t.Fatalf("max keys %d: event %s applied twice", maxKeys, ev.ID)
		}
		seen[ev.ID] = true
		if ev.Token != 0 {
			at := PositionOf(ev)
			if !pos[ev.Key].Before(at) {
				t.Fatalf("max keys %d: %s %s/%d applied after %s/%d", maxKeys, ev.Key, ev.Type, ev.Token, pos[ev.Key].Type, pos[ev.Key].Token)
			}
			pos[ev.Key] = at
		}
		applied = append(applied, ev.ID)
		return nil
	}
	for _, r := range recs {
		if err := c.record(context.Background(), r, h); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	if st.Applied+st.Duplicates+st.Stale+st.Poison != uint64(len(recs)) {
		t.Fatalf("max keys %d: %+v for %d records", maxKeys, st, len(recs))
	}
	return applied
}

// FuzzFence: any sequence of lock events on a few keys — late ones,
// repeated ones, poison records among them — is applied the same way by
// a consumer that holds 1 to 3 keys in memory and asks the application
// for the others as by one that holds them all: each event at most once,
// only after its key's position.
func FuzzFence(f *testing.F) {
	f.Add([]byte{0, 0, 0x10, 0, 0x20, 1, 0, 0, 0x15, 3, 1})
	f.Add([]byte{2, 0, 0x05, 0, 0x06, 0, 0x01, 1, 0, 1, 1, 0x80, 0x09})
	f.Add([]byte{1, 0, 0x30, 0, 0x31, 0, 0x32, 1, 2, 1, 0, 1, 1, 0, 0x0c})
	types := []string{events.TypeAcquired, events.TypeExtended, events.TypeReleased, events.TypeFailed}
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 || len(data) > 400 {
			return
		}
		maxKeys := int(data[0])%3 + 1
		var history []events.Event
		var recs []*kgo.Record
		for i := 1; i+1 < len(data); i += 2 {
			op, x := data[i], data[i+1]
			var ev events.Event
			if op&1 == 1 && len(history) > 0 {
				ev = history[int(x)%len(history)] // published again
			} else {
				typ := types[int(x>>4)%len(types)]
				ev = events.Event{Version: events.Version, ID: fmt.Sprintf("id-%d", i), Type: typ,
					Key: fmt.Sprintf("lock:%d", x%3), Timestamp: base.Add(time.Duration(op>>1&3) * time.Second)}
				if typ != events.TypeFailed {
					ev.Token = uint64(x>>2&3) + 1
				}
				history = append(history, ev)
			}
			v, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			if op&0x80 != 0 {
				v = v[:len(v)/2] // a poison record
			}
			recs = append(recs, &kgo.Record{Topic: events.Topic, Key: []byte(ev.Key), Value: v})
		}
		all := fenceRun(t, 1000, recs)
		some := fenceRun(t, maxKeys, recs)
		// Events without a token are deduplicated only by the ids a key
		// holds in memory: compare the fenced ones.
		fenced := func(ids []string) []string {
			var out []string
			for _, id := range ids {
				for _, ev := range history {
					if ev.ID == id && ev.Token != 0 {
						out = append(out, id)
					}
				}
			}
			return out
		}
		a, s := fenced(all), fenced(some)
		if fmt.Sprint(a) != fmt.Sprint(s) {
			t.Fatalf("holding all keys applied %v; holding %d applied %v", a, maxKeys, s)
		}
	})
}

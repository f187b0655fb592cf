package redis_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// commandCounts reads INFO commandstats: calls per command, the commands
// scripts run included.
func commandCounts(t *testing.T, srv *testserver.Redis) map[string]int {
	t.Helper()
	// Do returns a bulk string whole.
	info := srv.MustDo(t, "INFO", "commandstats")
	counts := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		calls, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		counts[strings.TrimPrefix(name, "cmdstat_")] = calls
	}
	return counts
}

// diff is after − before, without zeros, INFO itself and what a client
// library sends when it opens a connection (rueidis may open one more
// while a test runs: HELLO, CLIENT TRACKING…).
func diff(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range after {
		switch {
		case k == "info", k == "hello", k == "ping", k == "auth", k == "select", strings.HasPrefix(k, "client|"):
			continue
		}
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// TestCommandsPerPair: an uncontended lock and release on a key never
// locked before cost the server six commands — the two scripts, SET NX
// of the lock, one SET … GET of the fence (the token starts from the
// client's reading of the server clock: no TIME), the release's GET and
// DEL (no notice: nobody waited) — and a key locked before costs the
// same.
func TestCommandsPerPair(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	pair := func(key string) uint64 {
		t.Helper()
		tok, ok, err := b.Acquire(ctx, key, "o", time.Minute)
		if !ok || err != nil {
			t.Fatalf("acquire %s: ok=%v err=%v", key, ok, err)
		}
		if ok, err := b.Release(ctx, key, "o"); !ok || err != nil {
			t.Fatalf("release %s: ok=%v err=%v", key, ok, err)
		}
		return tok
	}
	pair("warm") // loads the scripts and samples the clock
	var last uint64
	for i, key := range []string{"new", "new", "other"} {
		// A key whose fence key is gone (here: never written) reads
		// the server's TIME and writes its fence again (fresh_start).
		want := map[string]int{"evalsha": 2, "set": 3, "get": 1, "del": 1, "time": 1}
		if i == 1 {
			want = map[string]int{"evalsha": 2, "set": 2, "get": 1, "del": 1}
			// Until the reading passes the fresh token, the next token
			// is the last + the room: one more write.
			time.Sleep(redis.FreshMargin)
		}
		before := commandCounts(t, srv)
		tok := pair(key)
		got := diff(before, commandCounts(t, srv))
		if len(got) != len(want) {
			t.Fatalf("pair %d on %s ran %v, want %v", i, key, got, want)
		}
		for k, n := range want {
			if got[k] != n {
				t.Fatalf("pair %d on %s ran %v, want %v", i, key, got, want)
			}
		}
		if key == "new" && tok <= last {
			t.Fatalf("token %d after %d", tok, last)
		}
		last = tok
	}
}

// TestTokensFollowTheServerClock: the token of a key without a fence is
// FreshMargin above the greater of the client's reading of the server
// clock, which errs high, and the server's TIME: it is above the server's
// TIME read before the grant, and within a second of it on a loopback
// server.
func TestTokensFollowTheServerClock(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	if r := b.ClockReading(); r != 0 {
		t.Fatalf("a fresh Backend reads the clock as %d before sampling it", r)
	}
	for i := range 20 {
		key := "clock:" + strconv.Itoa(i)
		before := uint64(serverMicros(t, srv))
		tok, ok, err := b.Acquire(ctx, key, "o", time.Minute)
		if !ok || err != nil {
			t.Fatalf("acquire: ok=%v err=%v", ok, err)
		}
		if tok < before+uint64(redis.FreshMargin.Microseconds()) || tok > before+uint64(time.Second/time.Microsecond) {
			t.Fatalf("token %d, server clock %d before the grant: want %v above it at least, within a second", tok, before, redis.FreshMargin)
		}
		if tok%b.TokenRoom() != 0 {
			t.Fatalf("token %d is not a multiple of the room %d", tok, b.TokenRoom())
		}
		if r := b.ClockReading(); r+uint64(redis.FreshMargin.Microseconds())+b.TokenRoom() <= tok {
			t.Fatalf("clock reading %d after a grant at %d: the token is more than the margin above it", r, tok)
		}
	}

	// The owner's clock given by the caller (a Redlock's reading) is the
	// token of a new key, rounded up to the room; the next multiple of the
	// room above the key's last token wins over a reading below it.
	tok, ok, err := b.AcquireAt(ctx, "given", "o", time.Minute, 5_000_000_000_000_000)
	if !ok || err != nil || tok != 5_000_000_000_000_000 {
		t.Fatalf("AcquireAt a reading: token %d ok=%v err=%v", tok, ok, err)
	}
	if _, err := b.Release(ctx, "given", "o"); err != nil {
		t.Fatal(err)
	}
	tok, ok, err = b.AcquireAt(ctx, "given", "o", time.Minute, 1)
	if !ok || err != nil || tok != 5_000_000_000_000_016 {
		t.Fatalf("AcquireAt below the last token: token %d ok=%v err=%v", tok, ok, err)
	}
	if _, err := b.Release(ctx, "given", "o"); err != nil {
		t.Fatal(err)
	}
	tok, ok, err = b.AcquireAt(ctx, "given", "o", time.Minute, 5_000_000_000_000_100)
	if !ok || err != nil || tok != 5_000_000_000_000_112 {
		t.Fatalf("AcquireAt a reading between multiples of the room: token %d ok=%v err=%v", tok, ok, err)
	}
	if _, _, err := b.AcquireAt(ctx, "given", "o", time.Minute, 1<<53); err == nil {
		t.Fatal("AcquireAt accepted a reading of 2^53")
	}
}

// serverMicros reads srv's clock (TIME) in microseconds.
func serverMicros(t testing.TB, srv *testserver.Redis) int64 {
	t.Helper()
	// TIME answers an array; read it with a script.
	us, err := strconv.ParseInt(srv.MustDo(t, "EVAL", "local t = redis.call('TIME') return t[1] * 1000000 + t[2]", "0"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// TestTokenAboveALostFence: a key whose fence key is gone — as it is at
// once when the server's clock jumps forward — gets a token above the
// last one although this grant's client reads the server clock lower
// than the client of the last grant did: by a sample's round trip and
// the drift since, or by a minute, its sample taken while the server's
// clock stood a minute back.
func TestTokenAboveALostFence(t *testing.T) {
	srv, ctx := startRedis(t)
	first, next := dial(t, srv), dial(t, srv)
	for _, c := range []struct {
		name          string
		ahead, behind time.Duration
	}{
		{"readings apart by the margin", redis.FreshMargin - time.Millisecond, 0},
		{"a reading taken while the clock stood back", 0, time.Minute},
	} {
		key := "lost-fence:" + c.name
		// A fence below the reading: the first grant's token is the
		// reading.
		srv.MustDo(t, "SET", fenceKey(key), "16")
		first.SetClockReading(serverMicros(t, srv) + c.ahead.Microseconds())
		last, ok, err := first.Acquire(ctx, key, "a", time.Minute)
		if !ok || err != nil {
			t.Fatalf("%s: first grant: ok=%v err=%v", c.name, ok, err)
		}
		if _, err := first.Release(ctx, key, "a"); err != nil {
			t.Fatal(err)
		}
		srv.MustDo(t, "DEL", fenceKey(key))
		next.SetClockReading(serverMicros(t, srv) - c.behind.Microseconds())
		tok, ok, err := next.Acquire(ctx, key, "b", time.Minute)
		if !ok || err != nil {
			t.Fatalf("%s: next grant: ok=%v err=%v", c.name, ok, err)
		}
		if tok <= last {
			t.Fatalf("%s: token %d after %d, its fence gone", c.name, tok, last)
		}
		if _, err := next.Release(ctx, key, "b"); err != nil {
			t.Fatal(err)
		}
	}
	// A Redlock's reading is the token of a new key on every node, as
	// given: no margin, no TIME.
	tok, ok, err := next.AcquireAt(ctx, "lost-fence:given", "o", time.Minute, 5_000_000_000_000_000)
	if !ok || err != nil || tok != 5_000_000_000_000_000 {
		t.Fatalf("AcquireAt a reading: token %d ok=%v err=%v", tok, ok, err)
	}
}

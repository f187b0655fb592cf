package redis_test

import (
	"bytes"
	"context"
	"errors"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// backgroundPipes counts the rueidis connections of this process that
// run their background reader goroutine.
func backgroundPipes() int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	return strings.Count(buf.String(), "rueidis.(*pipe)._backgroundRead")
}

// TestLoneCallerStaysSynchronous: one goroutine's lock calls, on every
// kind of context a caller passes (one that can end without a deadline,
// one with a deadline, one that never ends), keep the client's
// connections on rueidis's synchronous path, where the caller reads its
// reply itself, instead of handing every round trip to a writer and a
// reader goroutine (docs/performance.md).
func TestLoneCallerStaysSynchronous(t *testing.T) {
	srv := testserver.StartRedis(t)
	before := backgroundPipes()
	b := dial(t, srv)
	sem, err := b.SemaphoreView(driver.KindConfig{Permits: 2})
	if err != nil {
		t.Fatal(err)
	}
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadline, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	for i, ctx := range []context.Context{cancellable, deadline, context.Background()} {
		for j := range 20 {
			key := "lone:" + strconv.Itoa(i) + ":" + strconv.Itoa(j)
			if _, ok, err := b.Acquire(ctx, key, "me", 10*time.Second); err != nil || !ok {
				t.Fatalf("Acquire: %v %v", ok, err)
			}
			if ok, err := b.Extend(ctx, key, "me", 10*time.Second); err != nil || !ok {
				t.Fatalf("Extend: %v %v", ok, err)
			}
			if res := b.ExtendMany(ctx, []driver.ExtendRequest{{Key: key, Owner: "me", TTL: 10 * time.Second}}); res[0].Err != nil || !res[0].OK {
				t.Fatalf("ExtendMany: %+v", res[0])
			}
			if _, err := b.Inspect(ctx, key); err != nil {
				t.Fatal(err)
			}
			if ok, err := b.Release(ctx, key, "me"); err != nil || !ok {
				t.Fatalf("Release: %v %v", ok, err)
			}
			if _, ok, err := sem.Acquire(ctx, key, "me", 10*time.Second); err != nil || !ok {
				t.Fatalf("semaphore Acquire: %v %v", ok, err)
			}
			if ok, err := sem.Release(ctx, key, "me"); err != nil || !ok {
				t.Fatalf("semaphore Release: %v %v", ok, err)
			}
		}
	}
	if _, _, err := b.List(cancellable, "lone:", 10); err != nil {
		t.Fatal(err)
	}
	if n := backgroundPipes() - before; n != 0 {
		t.Errorf("%d connections went to rueidis's background mode for a lone caller", n)
	}
}

// TestLoneCallerCancelledMidCall: a lone caller's round trip runs on the
// synchronous path, which watches no context. An acquisition whose
// context ends while the server is stalled returns the context's error
// once the reply is in (or settleWait after its deadline), and leaves no
// lock held: the clean-up release reaches the server after the script,
// on the same connection. A release whose context ends meanwhile has
// released the lock when it returns without an error. Close in the
// middle of a stalled round trip returns at once and fails the call.
func TestLoneCallerCancelledMidCall(t *testing.T) {
	srv := testserver.StartRedis(t)
	c, err := turnstile.New(dial(t, srv), turnstile.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// stall stalls the server for d; the channel is closed when it ends.
	stall := func(d time.Duration) <-chan struct{} {
		t.Helper()
		// A script that runs for d stalls the server for everyone.
		if _, err := srv.Do("CONFIG", "SET", "busy-reply-threshold", "10000"); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = srv.Do("EVAL", `local t = redis.call('TIME') local e = t[1]*1000000 + t[2] + tonumber(ARGV[1])
				repeat t = redis.call('TIME') until t[1]*1000000 + t[2] >= e return 1`, "0", strconv.FormatInt(d.Microseconds(), 10))
		}()
		time.Sleep(20 * time.Millisecond) // the stall starts
		return done
	}
	held := func(key string) bool {
		t.Helper()
		n, err := srv.Do("EXISTS", lockKey(key))
		if err != nil {
			t.Fatal(err)
		}
		return n == "1"
	}

	for _, kind := range []string{"cancel", "deadline"} {
		t.Run("acquire/"+kind, func(t *testing.T) {
			key := "mid:" + kind
			ctx, cancel := context.WithCancel(context.Background())
			if kind == "deadline" {
				ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
			}
			defer cancel()
			stall(300 * time.Millisecond)
			time.AfterFunc(30*time.Millisecond, cancel)
			if l, err := c.TryAcquire(ctx, key); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryAcquire returned %v, %v; want the context's error", l, err)
			}
			// The Client gives back what the reply granted, in the
			// background.
			for end := time.Now().Add(3 * time.Second); held(key); {
				if time.Now().After(end) {
					t.Fatal("a cancelled acquisition left its lock held")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}

	t.Run("release", func(t *testing.T) {
		key := "mid:release"
		l, err := c.TryAcquire(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stall(200 * time.Millisecond)
		time.AfterFunc(30*time.Millisecond, cancel)
		err = l.Release(ctx)
		if err == nil && held(key) {
			t.Error("Release returned nil, and the lock is held")
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Release: %v", err)
		}
	})

	// A stall longer than settleWait: the round trip is cut when the
	// context ends (an acquisition's settleWait after it), long before
	// the server answers.
	t.Run("cut", func(t *testing.T) {
		l, err := c.TryAcquire(context.Background(), "mid:cut")
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{"extend", "release", "acquire"} {
			ctx, cancel := context.WithCancel(context.Background())
			stalled := stall(5 * time.Second)
			time.AfterFunc(30*time.Millisecond, cancel)
			returned := make(chan error, 1)
			go func() {
				switch op {
				case "extend":
					returned <- l.Extend(ctx, 10*time.Second)
				case "release":
					returned <- l.Release(ctx)
				default:
					_, err := c.TryAcquire(ctx, "mid:cut:acquire")
					returned <- err
				}
			}()
			select {
			case err := <-returned:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%s cut mid-call returned %v; want context.Canceled", op, err)
				}
			case <-stalled:
				t.Errorf("%s whose context ended waited for the stalled server", op)
				<-returned
			}
			<-stalled
			cancel()
		}
	})

	t.Run("close", func(t *testing.T) {
		b := dial(t, srv)
		// Dial every connection of the client and sample the server's
		// clock first: a connection still being dialled when Close runs
		// would be opened after it.
		for i := range 64 {
			key := "mid:warm:" + strconv.Itoa(i)
			if _, ok, err := b.Acquire(context.Background(), key, "me", 10*time.Second); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if _, err := b.Release(context.Background(), key, "me"); err != nil {
				t.Fatal(err)
			}
		}
		// rueidis's Close waits up to 1 s for a PING behind the round
		// trips in flight before it closes the connection.
		stalled := stall(5 * time.Second)
		var wg sync.WaitGroup
		var err error
		returned := make(chan struct{})
		wg.Go(func() {
			_, _, err = b.Acquire(context.Background(), "mid:close", "me", 10*time.Second)
			close(returned)
		})
		time.Sleep(50 * time.Millisecond)
		_ = b.Close()
		select {
		case <-returned:
		case <-stalled:
			t.Error("Acquire on a client closed in the middle of its round trip waited for the stalled server")
		}
		wg.Wait()
		if err == nil {
			t.Error("Acquire succeeded on a client closed while its round trip was stalled")
		}
		<-stalled
	})
}

// TestLoneThenConcurrent: a client whose connections served one caller
// synchronously serves many at once (rueidis moves a connection to its
// background mode when calls overlap) without losing a grant or
// granting a key twice.
func TestLoneThenConcurrent(t *testing.T) {
	srv := testserver.StartRedis(t)
	c, err := turnstile.New(dial(t, srv), turnstile.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i := range 50 {
		l, err := c.Acquire(ctx, "seq:"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	holder := map[string]int{}
	var last sync.Map // key → last token
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for i := range 100 {
				key := "hot:" + strconv.Itoa(i%4)
				l, err := c.Acquire(wctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if h, ok := holder[key]; ok {
					t.Errorf("%s granted to %d while %d held it", key, w, h)
				}
				holder[key] = w
				if prev, ok := last.Load(key); ok && l.Token() <= prev.(uint64) {
					t.Errorf("%s: token %d after %d", key, l.Token(), prev)
				}
				last.Store(key, l.Token())
				delete(holder, key)
				mu.Unlock()
				if err := l.Release(wctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestNoticesOnAConnectionOfTheirOwn: a Backend that dialled its own
// client subscribes to release notices on a connection that carries no
// lock command, so that its lock connections stay on rueidis's
// synchronous path after it waited for a key once; notices still arrive.
func TestNoticesOnAConnectionOfTheirOwn(t *testing.T) {
	srv := testserver.StartRedis(t)
	b := dial(t, srv)
	ctx := ctxFor(t, time.Minute)
	if _, ok, err := b.Acquire(ctx, "own:held", "other", 10*time.Second); err != nil || !ok {
		t.Fatal(ok, err)
	}
	ch, stop, err := b.Released(ctx, "own:held")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for i := range 64 {
		key := "own:" + strconv.Itoa(i)
		if _, ok, err := b.Acquire(ctx, key, "me", 10*time.Second); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, err := b.Release(ctx, key, "me"); err != nil {
			t.Fatal(err)
		}
	}
	// The holder's release is marked only if someone failed to take it.
	if _, ok, err := b.Acquire(ctx, "own:held", "me", 10*time.Second); err != nil || ok {
		t.Fatalf("Acquire of a held lock: %v %v", ok, err)
	}
	if _, _, err := b.ReleaseNotice(ctx, "own:held", "other", driver.NoticeAlways); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal("no release notice")
	}
	list := srv.MustDo(t, "CLIENT", "LIST")
	subscribed := 0
	for line := range strings.SplitSeq(list, "\n") {
		if !strings.Contains(line, " ssub=1") && !strings.Contains(line, " sub=1") {
			continue
		}
		subscribed++
		if strings.Contains(line, "cmd=evalsha") || strings.Contains(line, "cmd=eval ") {
			t.Errorf("the subscribed connection ran lock scripts: %s", line)
		}
	}
	if subscribed != 1 {
		t.Errorf("%d subscribed connections, want 1:\n%s", subscribed, list)
	}
}

package redis_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/redis"
)

// TestReleasedWithoutShardedPubSub: a server that does not know SSUBSCRIBE
// (Redis before 7.0, emulated by a proxy that misspells the command on its
// way) still serves Released, over SUBSCRIBE, which is where such a
// server's release script publishes.
func TestReleasedWithoutShardedPubSub(t *testing.T) {
	srv := testserver.StartRedis(t)
	addr := startMisspellingProxy(t, srv.Addr(), "SSUBSCRIBE", "XSUBSCRIBE")
	rb, err := redis.Dial(ctxFor(t, 10*time.Second), rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rb.Close() })
	gc := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = gc.Close() })
	gb, err := redis.NewGoRedis(gc)
	if err != nil {
		t.Fatal(err)
	}

	for name, b := range map[string]*redis.Backend{"rueidis": rb, "go-redis": gb} {
		t.Run(name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			k := "fallback:" + name
			ch, stop, err := b.Released(ctx, k)
			if err != nil {
				t.Fatalf("Released: %v", err)
			}
			n := srv.MustDo(t, "EVAL", "return redis.call('PUBSUB', 'NUMSUB', KEYS[1])[2]", "1", channelKey(k))
			if n != "1" {
				t.Fatalf("%s plain subscriptions on the server, want 1", n)
			}
			srv.MustDo(t, "PUBLISH", channelKey(k), "1")
			awaitNotice(t, ch, "a plain PUBLISH did not reach the waiter")
			stop()
			waitFor(t, func() bool {
				return srv.MustDo(t, "EVAL", "return redis.call('PUBSUB', 'NUMSUB', KEYS[1])[2]", "1", channelKey(k)) == "0"
			}, "the plain subscription outlived its last waiter")
		})
	}
}

// startMisspellingProxy forwards loopback connections to addr, replacing
// the RESP bulk string of command from, in either case, with to (of the
// same length) on the way to the server. It stops when the test ends.
func startMisspellingProxy(t *testing.T, addr, from, to string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { _ = misspell(s, c, from, to); _ = s.Close() })
			wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
		}
	})
	return l.Addr().String()
}

// misspell copies src to dst, rewriting every RESP bulk string from (in
// any case) to to. A chunk that ends inside such a bulk string is held
// back until the rest arrives, which it must: a command never ends there.
func misspell(dst io.Writer, src io.Reader, from, to string) error {
	head := "$" + strconv.Itoa(len(from)) + "\r\n"
	pat := []byte(head + from + "\r\n")
	rep := []byte(head + to + "\r\n")
	var pending []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		pending = append(pending, buf[:n]...)
		out := pending
		for i := 0; i+len(pat) <= len(out); i++ {
			if bytes.EqualFold(out[i:i+len(pat)], pat) {
				copy(out[i:], rep)
			}
		}
		keep := 0 // bytes at the end that may begin the pattern
		for k := min(len(pat)-1, len(out)); k > 0; k-- {
			if bytes.EqualFold(out[len(out)-k:], pat[:k]) {
				keep = k
				break
			}
		}
		if _, werr := dst.Write(out[:len(out)-keep]); werr != nil {
			return werr
		}
		pending = append(pending[:0], out[len(out)-keep:]...)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

package redis_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
	"github.com/turnstilelock/turnstile/redis"
)

// TestEveryKeyIsReserved: every key the backend writes, for every lock
// kind — found by scanning the server after locks of each kind were
// taken, waited for, queued for and guarded — is one package fence
// refuses to write as data, through DataKey or by its name: a data key
// cannot clobber a lock. And every reserved suffix but the release
// channel's was among them, so the list holds no name the backend does
// not use.
func TestEveryKeyIsReserved(t *testing.T) {
	srv, ctx := startRedis(t)
	b := dial(t, srv)
	guard, err := fence.NewRedis(rueidisClient(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Minute
	must := func(what string, ok bool, err error) {
		t.Helper()
		if !ok || err != nil {
			t.Fatalf("%s: ok=%v err=%v", what, ok, err)
		}
	}

	tok, ok, err := b.Acquire(ctx, "plain", "o", ttl)
	must("plain lock", ok, err)
	data := fence.DataKey("plain", "stock")
	if err := guard.Set(ctx, "plain", tok, data, "1"); err != nil {
		t.Fatal(err)
	}
	// A backend with a restart quarantine writes the slot's start marker,
	// once the server has run for the quarantine (the start is known to
	// the second).
	quarantined := dial(t, srv, redis.WithRestartQuarantine(time.Millisecond))
	for {
		_, ok, err = quarantined.Acquire(ctx, "quarantined", "o", ttl)
		if !errors.Is(err, redis.ErrQuarantined) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	must("lock with a restart quarantine", ok, err)
	_, ok, err = reentrantOf(t, b).Acquire(ctx, "reentrant", "o", ttl)
	must("reentrant lock", ok, err)
	sem := semaphoreOf(t, b, 2)
	_, ok, err = sem.Acquire(ctx, "semaphore", "o", ttl)
	must("semaphore", ok, err)
	read, write := readWriteOf(t, b)
	_, ok, err = read.Acquire(ctx, "rw", "reader", ttl)
	must("read lock", ok, err)
	// A writer waiting for the reader leaves its claim.
	if _, ok, err := write.Acquire(ctx, "rw", "writer", ttl); ok || err != nil {
		t.Fatalf("write lock beside a reader: ok=%v err=%v; want a claim", ok, err)
	}
	_, ok, err = write.Acquire(ctx, "rw-w", "writer", ttl)
	must("write lock", ok, err)
	fair := fairOf(t, b)
	_, ok, err = fair.Acquire(ctx, "fair", "first", ttl)
	must("fair lock", ok, err)
	wctx, stop := context.WithCancel(ctx)
	queued := make(chan error, 1)
	go func() {
		_, err := fair.AcquireWait(wctx, "fair", "second", ttl)
		queued <- err
	}()
	defer func() { stop(); <-queued }()
	for srv.MustDo(t, "EXISTS", "{fair}:queue:alive") != "1" {
		select {
		case err := <-queued:
			t.Fatalf("the fair lock's waiter: %v", err)
		case <-ctx.Done():
			t.Fatal("the fair lock's waiter never queued")
		case <-time.After(10 * time.Millisecond):
		}
	}

	admin := rueidisClient(t, srv)
	keys, err := admin.Do(ctx, admin.B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if k == data {
			continue
		}
		i := strings.LastIndexByte(k, '}')
		if !strings.HasPrefix(k, "{") || i < 0 {
			t.Errorf("key %q is not named P{K}S", k)
			continue
		}
		resource, suffix := k[1:i], k[i+1:]
		seen[suffix] = true
		if !rediskeys.Taken(k) {
			t.Errorf("key %q (suffix %q) is not reserved", k, suffix)
		}
		for _, write := range []struct {
			how string
			key string
		}{{"by its name", k}, {"through DataKey", fence.DataKey(resource, strings.TrimPrefix(suffix, ":"))}} {
			if suffix == "" && write.how == "through DataKey" {
				continue // DataKey always adds a name
			}
			err := guard.Set(ctx, resource, tok+1000, write.key, "clobbered")
			if !errors.Is(err, turnstile.ErrInvalidKey) {
				t.Errorf("writing the lock's key %q %s through the guard = %v, want ErrInvalidKey", k, write.how, err)
			}
		}
	}
	for _, s := range rediskeys.Reserved() {
		if s != rediskeys.Released && !seen[s.String()] {
			t.Errorf("reserved suffix %q: no key of it was written", s)
		}
	}
	if t.Failed() {
		t.Logf("keys: %q", slices.Sorted(slices.Values(keys)))
	}
}

package main

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/pgproc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// The presets advise prints for phases 1–4 open and lock against real
// servers: its URL with the placeholder hosts replaced by redis-servers
// and PostgreSQL started here, and its options. Two clients: the first
// takes the lock, the second is kept out until it is released.
//
// Test-only additions to the URLs: quarantine=0 (the servers have just
// started and hold no lock anyone could lose) and a node timeout of 2s
// for a loaded machine. The Kafka observer of phase 4 is left out here;
// fallback/phase4_test.go runs phase 4 with it.
func TestAdvisePresetsOpen(t *testing.T) {
	t.Parallel()
	hosts, pg := startPresetServers(t)
	placeholder := regexp.MustCompile(`redis([1-5]):6379`)
	local := func(raw string) string {
		raw = placeholder.ReplaceAllStringFunc(raw, func(m string) string {
			n, _ := strconv.Atoi(placeholder.FindStringSubmatch(m)[1])
			return hosts[n-1]
		})
		if strings.HasPrefix(raw, "redlock://") {
			sep := "?"
			if strings.Contains(raw, "?") {
				sep = "&"
			}
			raw += sep + "quarantine=0&node_timeout=2s"
		}
		return raw
	}

	// Phase 4 puts a database behind the breaker only where it carries
	// an outage's whole load; at the documented ~1,000/s per database no
	// Redlock load is that small, so this case sizes with one that
	// carries 50,000/s.
	bigDB := documentedCost()
	bigDB.dbRate = 50000
	for _, tt := range []struct {
		phase int
		args  []string
		c     cost
	}{
		{1, []string{"--rate", "5000"}, documentedCost()},
		{2, []string{"--rate", "20k"}, documentedCost()},
		{3, []string{"--rate", "5000", "--safety", "money", "--stores", "redis"}, documentedCost()},
		{4, []string{"--rate", "10k", "--safety", "money", "--stores", "redis,postgres,kafka"}, bigDB},
	} {
		in, err := parseAdvise(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		a := advise(in, tt.c)
		p := a.Preset
		if tt.phase == 4 && (a.Capacity.Failover == nil || !a.Capacity.Fits) {
			t.Fatalf("phase 4 without a failover that fits: %+v", a.Capacity)
		}
		if p.Phase != tt.phase {
			t.Fatalf("advise %q: phase %d, want %d", tt.args, p.Phase, tt.phase)
		}
		raw := local(p.URL)
		if strings.HasPrefix(p.URL, "fallback://") {
			u, err := url.Parse(p.URL)
			if err != nil {
				t.Fatalf("phase 4 URL %q: %v", p.URL, err)
			}
			q := u.Query()
			if !strings.HasPrefix(q.Get("primary"), "redlock://") || !strings.HasPrefix(q.Get("secondary"), "postgres://") {
				t.Fatalf("phase 4 URL %q: want a redlock:// primary and a postgres:// secondary", p.URL)
			}
			raw = "fallback://?primary=" + url.QueryEscape(local(q.Get("primary"))) + "&secondary=" + url.QueryEscape(pg.URL())
		}
		opts := presetOptions(t, p.Options)
		key := "advise:phase" + strconv.Itoa(tt.phase)
		t.Logf("phase %d: %s", tt.phase, raw)
		ctx := adviseCtx(t, time.Minute)
		open := func() *turnstile.Client {
			c, err := turnstile.Open(ctx, raw, opts...)
			if err != nil {
				t.Fatalf("phase %d: open %s: %v", tt.phase, raw, err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		holder, other := open(), open()
		var l *turnstile.Lease
		for l == nil {
			// Fresh servers load the scripts on their first calls, which
			// on a loaded machine can take longer than a node timeout.
			if l, err = holder.TryAcquire(ctx, key); err != nil {
				if ctx.Err() != nil {
					t.Fatalf("phase %d: no lock: %v", tt.phase, err)
				}
				l = nil
				time.Sleep(50 * time.Millisecond)
			}
		}
		if o, err := other.TryAcquire(ctx, key); err == nil {
			_ = o.Release(ctx)
			t.Fatalf("phase %d: a second client got the held lock", tt.phase)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("phase %d: release: %v", tt.phase, err)
		}
		next, err := other.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("phase %d: the lock was not passed on: %v", tt.phase, err)
		}
		if tt.phase >= 3 && next.Token() <= l.Token() {
			t.Errorf("phase %d: token %d after %d", tt.phase, next.Token(), l.Token())
		}
		_ = next.Release(ctx)
	}
}

// adviseCtx returns a context that ends after d, or when the test ends.
func adviseCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var ttlOption = regexp.MustCompile(`^turnstile\.WithTTL\(([0-9]+)\*time\.(Second|Millisecond)\)$`)

// presetOptions turns the Go options of a preset into options. An option
// this test does not know fails it: a new one must be tried here too.
func presetOptions(t *testing.T, src []string) []turnstile.Option {
	t.Helper()
	var opts []turnstile.Option
	for _, s := range src {
		switch m := ttlOption.FindStringSubmatch(s); {
		case m != nil:
			n, _ := strconv.Atoi(m[1])
			unit := time.Second
			if m[2] == "Millisecond" {
				unit = time.Millisecond
			}
			opts = append(opts, turnstile.WithTTL(time.Duration(n)*unit))
		case s == "turnstile.WithoutWatchdog()":
			opts = append(opts, turnstile.WithoutWatchdog())
		case strings.HasPrefix(s, "clients[crc32.ChecksumIEEE("):
			// Partitioning between Redlocks: this test opens the first.
		case strings.HasPrefix(s, "turnstile.WithObserver(kafka)"):
			// fallback/phase4_test.go opens phase 4 with its Kafka observer.
		default:
			t.Fatalf("preset option %q is not one this test knows", s)
		}
	}
	return opts
}

// startPresetServers starts five redis-servers and PostgreSQL on free
// loopback ports, all at once (a loaded machine takes seconds for each),
// and stops them when the test ends.
func startPresetServers(t *testing.T) ([]string, *pgproc.Server) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	keep := func(kill func(), err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		t.Cleanup(kill)
	}
	redis := make([]*redisproc.Server, 5)
	for i := range redis {
		dir := t.TempDir()
		wg.Go(func() {
			s, err := redisproc.Start(dir)
			if err == nil {
				redis[i] = s
				keep(s.Kill, nil)
			} else {
				keep(nil, err)
			}
		})
	}
	var pg *pgproc.Server
	wg.Go(func() {
		s, err := pgproc.Start()
		if err == nil {
			pg = s
			keep(s.Kill, nil)
		} else {
			keep(nil, err)
		}
	})
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	var hosts []string
	for _, s := range redis {
		hosts = append(hosts, s.Addr())
	}
	return hosts, pg
}

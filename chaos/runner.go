package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// settings are the knobs of one run.
type settings struct {
	Stores   []string      // store configurations, by name (stores())
	Faults   []string      // faults, by name (faults())
	Duration time.Duration // how long each store × fault cell injects faults
	Workers  int           // workload processes per cell
	Keys     int           // keys each worker locks side by side (0: 1)
	TTL      time.Duration // the lease TTL the workers use
	Hold     time.Duration // the pause between a critical section's read and write
	Dir      string        // where servers keep their files
	Log      io.Writer     // progress, for people
	History  string        // if set, each cell's events go to HISTORY/<store>-<fault>.jsonl, its servers' logs beside them (keepLogs)
}

// proxyLog is where the proxies log with a history (logProxies), or "".
func (s settings) proxyLog() string {
	if s.History == "" {
		return ""
	}
	return filepath.Join(s.Dir, "proxies.log")
}

// cell is the outcome of one store × fault run.
type cell struct {
	Store    string        `json:"store"`
	Config   string        `json:"config"`
	Fault    string        `json:"fault"`
	Skipped  string        `json:"skipped,omitempty"` // why the fault does not apply to the store
	Fenced   bool          `json:"fenced_safe"`       // zero violations of the fenced register
	Verdict  verdict       `json:"verdict"`
	Faults   int           `json:"faults_injected"`
	Wall     time.Duration `json:"-"`
	WallSecs float64       `json:"wall_s"`
	Error    string        `json:"error,omitempty"` // the cell could not run
}

// run runs every store × fault cell of s, calling each cell's result to
// done as it ends.
func run(ctx context.Context, s settings, done func(cell)) error {
	regDir := filepath.Join(s.Dir, "register")
	if err := os.MkdirAll(regDir, 0o755); err != nil {
		return err
	}
	reg, err := redisproc.Start(regDir)
	if err != nil {
		return fmt.Errorf("the register's redis-server: %w", err)
	}
	defer reg.Kill()
	if s.History != "" {
		stop, err := logProxies(s.proxyLog())
		if err != nil {
			return err
		}
		defer stop()
	}
	all := stores()
	kinds := faults()
	for _, name := range s.Stores {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st, ok := all[name]
		if !ok {
			return fmt.Errorf("unknown store %q", name)
		}
		fmt.Fprintf(s.Log, "== %s: starting %s\n", name, st.config)
		dir := filepath.Join(s.Dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		t, err := st.start(dir, s.TTL)
		if err != nil {
			for _, f := range s.Faults {
				done(cell{Store: name, Config: st.config, Fault: f, Error: err.Error()})
			}
			continue
		}
		for _, fname := range s.Faults {
			f, ok := kinds[fname]
			if !ok {
				t.close()
				return fmt.Errorf("unknown fault %q", fname)
			}
			c := cell{Store: name, Config: st.config, Fault: fname}
			if why := f.applies(t); why != "" {
				c.Skipped = why
				done(c)
				continue
			}
			start := time.Now()
			r, err := runCell(ctx, s, t, f, reg.Addr())
			if err != nil {
				c.Error = err.Error()
			} else {
				c.Verdict, c.Faults = r.verdict, r.injected
				c.Fenced = r.verdict.Violations() == 0 && r.verdict.Linearizable != "unknown"
			}
			c.Wall = time.Since(start)
			c.WallSecs = float64(c.Wall.Round(100*time.Millisecond)) / 1e9
			done(c)
		}
		t.close()
	}
	return nil
}

type cellResult struct {
	verdict  verdict
	injected int
}

// runCell starts the workers on a fresh key, injects f again and again
// for s.Duration, lets the store recover, stops the workers and checks
// what they saw.
func runCell(ctx context.Context, s settings, t target, f fault, register string) (res cellResult, err error) {
	if s.History != "" {
		// The servers' own account of the cell, beside its history: kept
		// when the cell fails too, when it is most wanted.
		logs := logsOf(t, s.proxyLog())
		marks := markLogs(logs)
		defer func() {
			if kerr := keepLogs(s.History, t.base().name, f.name, logs, marks); kerr != nil && err == nil {
				err = kerr
			}
		}()
	}
	key := fmt.Sprintf("chaos-%s-%d", f.name, time.Now().UnixNano())
	lease := leaseOf(t, s.TTL)
	// A long hold outlasts the fault by a lease, so that the lock can
	// pass to another worker meanwhile, and by 2 s more: on a busy
	// machine a restart or a grant can take that long.
	storeURL := t.base().url
	if h, ok := t.(interface {
		holdURL(time.Duration) (string, error)
	}); ok && f.delay(lease) > 0 {
		if storeURL, err = h.holdURL(lease + f.delay(lease)); err != nil {
			return cellResult{}, err
		}
	}
	pool := &workers{s: s, url: storeURL, key: key, register: register, longFor: f.length(lease) + lease + 2*time.Second, delay: f.delay(lease)}
	defer pool.stopAll()
	for range s.Workers {
		if err := pool.start(); err != nil {
			return cellResult{}, err
		}
	}
	// The first grant shows that every worker opened the store: faults
	// count from there, not from a client's start-up.
	if err := pool.waitGrants(ctx, s.Workers, time.Minute); err != nil {
		return cellResult{}, err
	}
	env := &faultEnv{t: t, pool: pool, ttl: lease, log: s.Log}
	// A lock delay keeps a failed holder's lock that much longer.
	bound := cellBound(t.base().name, f.name, lease) + f.delay(lease)
	var windows []window
	end := time.Now().Add(s.Duration)
	for time.Now().Before(end) && ctx.Err() == nil {
		if n := len(windows); n > 0 {
			// Each heal gets its bound to be granted in before the next
			// fault: a fault injected sooner would hold up the grant
			// that the check expects of the heal before it.
			pool.waitGrantAfter(ctx, windows[n-1].Heal, bound)
		}
		sleepCtx(ctx, steadyFor(s.TTL))
		if f.long {
			// Not finding one is no reason to skip the fault.
			_, _ = pool.longHolder(ctx, 10*lease)
		}
		inject := time.Now().UnixNano()
		env.cut = 0
		heal, err := f.inject(ctx, env)
		if err != nil {
			return cellResult{}, fmt.Errorf("%s: %w", f.name, err)
		}
		w := window{Inject: inject, Cut: env.cut}
		if heal != nil {
			sleepCtx(ctx, f.length(lease))
			w.CutEnd = time.Now().UnixNano()
			w.Healing = w.CutEnd
			if err := heal(); err != nil {
				return cellResult{}, fmt.Errorf("heal %s: %w", f.name, err)
			}
		}
		w.Heal = time.Now().UnixNano()
		if w.Cut != 0 && w.CutEnd == 0 {
			w.CutEnd = w.Heal
		}
		windows = append(windows, w)
	}
	// After the last heal the store must grant again within the bound.
	pool.waitGrantAfter(ctx, windows[len(windows)-1].Heal, bound)
	// The workers stop asking for locks now: the liveness check counts
	// up to here, not the time they take to finish.
	runEnd := time.Now().UnixNano()
	pool.stopAll()

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{register}, DisableCache: true})
	if err != nil {
		return cellResult{}, err
	}
	defer rc.Close()
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	finals := make([]finals, max(s.Keys, 1))
	for k := range finals {
		lk := laneKey(key, k)
		if finals[k].fenced, err = readInt(rctx, rc, fencedKey(lk)); err != nil {
			return cellResult{}, fmt.Errorf("read the fenced register of %s: %w", lk, err)
		}
		if finals[k].control, err = readInt(rctx, rc, controlKey(lk)); err != nil {
			return cellResult{}, fmt.Errorf("read the control register of %s: %w", lk, err)
		}
	}
	events := pool.history()
	if s.History != "" {
		if err := writeHistory(filepath.Join(s.History, t.base().name+"-"+f.name+".jsonl"), events, windows); err != nil {
			return cellResult{}, err
		}
	}
	v := checkKeys(events, windows, finals, bound, runEnd)
	return cellResult{verdict: v, injected: len(windows)}, nil
}

// writeHistory writes the events of a cell, and its fault windows as
// events "inject" and "heal" (and "cut" and "cut-end", window.Cut), as
// JSON lines in time order; "healing" is when the heal began.
func writeHistory(path string, events []event, windows []window) error {
	all := append([]event(nil), events...)
	for _, w := range windows {
		all = append(all, event{Ev: "inject", Start: w.Inject}, event{Ev: "heal", Start: w.Heal})
		if w.Cut != 0 {
			all = append(all, event{Ev: "cut", Start: w.Cut}, event{Ev: "cut-end", Start: w.CutEnd})
		}
		if w.Healing != 0 {
			all = append(all, event{Ev: "healing", Start: w.Healing})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Start < all[j].Start })
	var b bytes.Buffer
	for _, e := range all {
		line, _ := json.Marshal(e)
		b.Write(append(line, '\n'))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// steadyFor is the quiet time before each fault: long enough for the
// workers to be granted the lock a few times.
func steadyFor(ttl time.Duration) time.Duration { return max(ttl, 500*time.Millisecond) }

func sleepCtx(ctx context.Context, d time.Duration) { sleep(ctx, d) }

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"

	// The stores a worker can open by URL.
	_ "github.com/turnstilelock/turnstile/etcd"
	_ "github.com/turnstilelock/turnstile/fallback"
	_ "github.com/turnstilelock/turnstile/mysql"
	_ "github.com/turnstilelock/turnstile/postgres"
	_ "github.com/turnstilelock/turnstile/redis"
	_ "github.com/turnstilelock/turnstile/redlock"
	_ "github.com/turnstilelock/turnstile/zookeeper"
)

// workerEnv names the environment variable that turns this binary into a
// workload process: its value is the workerConfig as JSON.
const workerEnv = "TURNSTILE_CHAOS_WORKER"

// workerConfig is what the runner tells a workload process.
type workerConfig struct {
	ID  int    `json:"id"`
	URL string `json:"url"`
	Key string `json:"key"`
	// Keys is how many keys the worker locks side by side, one loop of
	// critical sections each (laneKey); 0 means 1.
	Keys     int           `json:"keys,omitempty"`
	TTL      time.Duration `json:"ttl"`
	Hold     time.Duration `json:"hold"`
	Register string        `json:"register"` // host:port of the register's redis-server
	// AcquireTimeout bounds one Acquire call; a failed one is recorded
	// and retried.
	AcquireTimeout time.Duration `json:"acquire_timeout"`
	// LongHold replaces Hold in the next section after the runner writes
	// "long" to the worker's stdin: the runner injects a fault while a
	// holder is between reading and writing, and keeps it there past
	// the fault.
	LongHold time.Duration `json:"long_hold"`
	// LockDelay is the Client's turnstile.WithLockDelay (0: none).
	LockDelay time.Duration `json:"lock_delay,omitempty"`
}

// Event kinds a worker reports, one JSON line each on its stdout.
const (
	evAcquired    = "acq"     // Acquire returned a lease (Tok)
	evAcquireFail = "acqfail" // Acquire failed (Err)
	evCall        = "call"    // a register write (Op, Tok, Val) or the release (Op "rel") is about to be sent
	evMark        = "mark"    // the fenced marker write returned (Res)
	evRead        = "read"    // the fenced register was read (Val)
	evWrite       = "write"   // the fenced register write returned (Val, Res)
	evCRead       = "cread"   // the control register was read (Val)
	evCWrite      = "cwrite"  // the control register write returned (Val, Res)
	evHold        = "hold"    // both registers read; holding before the writes (Op "long" for a long hold)
	evValid       = "valid"   // during a hold: the lease was renewed, and is valid until U
	evReleased    = "rel"     // Release returned (Res: ok, lost, err)
)

// Results of a register write.
const (
	resOK      = "ok"
	resStale   = "stale"   // the fenced register refused a stale token
	resUnknown = "unknown" // the write may or may not have been applied
)

// event is one line of a worker's report. Times are Unix nanoseconds from
// the wall clock: every process runs on this host, so they compare.
type event struct {
	W     int    `json:"w"`
	K     int    `json:"k,omitempty"` // the key's lane (laneKey)
	CS    int    `json:"cs"`          // the worker's critical-section number
	Ev    string `json:"ev"`
	Op    string `json:"op,omitempty"`
	Tok   uint64 `json:"tok,omitempty"`
	Val   int64  `json:"v,omitempty"`
	Res   string `json:"r,omitempty"`
	Err   string `json:"err,omitempty"`
	Start int64  `json:"s"`
	End   int64  `json:"e,omitempty"`
	// U is when the section's lease ends at the earliest, by its own
	// clock (Lease.Validity), as seen at this event; 0 when it had ended.
	U int64 `json:"u,omitempty"`
}

// laneKey is the lock key of lane k of a cell whose first key is key.
func laneKey(key string, k int) string {
	if k == 0 {
		return key
	}
	return key + "/" + strconv.Itoa(k)
}

// Register keys: the fenced counter and its marker live under the lock
// key's resource (fence.DataKey), the unfenced control counter beside it.
func fencedKey(key string) string  { return fence.DataKey(key, "count") }
func markKey(key string) string    { return fence.DataKey(key, "mark") }
func controlKey(key string) string { return "control:" + key }

// runWorker is a workload process: until its stdin closes it acquires the
// key, runs one critical section against both registers and releases.
// It exits 0 when told to stop, 1 when it cannot start.
func runWorker(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker: bad config:", err)
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var long atomic.Bool
	go func() { // the runner asks for a long hold, and closes stdin to stop the worker
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "long":
				long.Store(true)
			case "short":
				long.Store(false)
			}
		}
		stop()
	}()
	out := &reporter{w: bufio.NewWriter(os.Stdout), id: cfg.ID}
	if err := work(ctx, cfg, out, &long); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "chaos worker:", err)
		return 1
	}
	return 0
}

// reporter writes events as JSON lines, flushing each one: the runner
// must see an acquisition at once to pause or kill its holder.
type reporter struct {
	mu sync.Mutex
	w  *bufio.Writer
	id int
}

func (r *reporter) emit(e event) {
	e.W = r.id
	b, _ := json.Marshal(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.w.Write(append(b, '\n'))
	_ = r.w.Flush()
}

func nowNS() int64 { return time.Now().UnixNano() }

func work(ctx context.Context, cfg workerConfig, out *reporter, long *atomic.Bool) error {
	open, cancel := context.WithTimeout(ctx, 30*time.Second)
	opts := []turnstile.Option{turnstile.WithTTL(cfg.TTL), turnstile.WithInstanceID("chaos-worker-" + strconv.Itoa(cfg.ID))}
	if cfg.LockDelay > 0 {
		opts = append(opts, turnstile.WithLockDelay(cfg.LockDelay))
	}
	client, err := turnstile.Open(open, cfg.URL, opts...)
	cancel()
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer client.Close()
	reg, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.Register}, DisableCache: true})
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	defer reg.Close()
	guard, err := fence.NewRedis(reg, fence.AllowSameToken())
	if err != nil {
		return err
	}
	// Every lane is a loop of critical sections on its own key, through
	// the one Client of the process. Only lane 0 takes long holds: the
	// runner aims its faults at that key's holder.
	var wg sync.WaitGroup
	for k := range max(cfg.Keys, 1) {
		wg.Go(func() {
			lo, key, lg := laneOut{out, k}, laneKey(cfg.Key, k), long
			if k != 0 {
				lg = new(atomic.Bool)
			}
			for cs := 1; ctx.Err() == nil; cs++ {
				section(ctx, cfg, key, client, reg, guard, lo, cs, lg)
			}
		})
	}
	wg.Wait()
	return nil
}

// laneOut reports the events of one lane.
type laneOut struct {
	r *reporter
	k int
}

func (l laneOut) emit(e event) {
	e.K = l.k
	l.r.emit(e)
}

// section is one critical section. It deliberately does not stop when the
// lease is lost: it stands for code that checked its lease and was then
// paused, so the registers see what a stale holder would write. The fenced
// register must refuse it; the control register shows what happens without
// the fence.
func section(ctx context.Context, cfg workerConfig, key string, client *turnstile.Client, reg rueidis.Client, guard *fence.Redis, out laneOut, cs int, long *atomic.Bool) {
	start := nowNS()
	actx, cancel := context.WithTimeout(ctx, cfg.AcquireTimeout)
	lease, err := client.Acquire(actx, key)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		out.emit(event{CS: cs, Ev: evAcquireFail, Err: err.Error(), Start: start, End: nowNS()})
		// A store that refuses at once must not make the worker spin.
		sleep(ctx, 20*time.Millisecond)
		return
	}
	tok := lease.Token()
	out.emit(event{CS: cs, Ev: evAcquired, Tok: tok, Start: start, End: nowNS(), U: validUntil(lease)})
	// Register operations get their own deadline (one for the reads, one
	// for the writes after the hold): the register's server is never
	// faulted, and a worker told to stop still finishes the section it is
	// in, so that its writes are reported.
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()

	// The marker write raises the register's guard to this token before
	// the read, so that an older holder's later write is refused even if
	// it read before us.
	out.emit(event{CS: cs, Ev: evCall, Op: evMark, Tok: tok, Start: nowNS()})
	s := nowNS()
	res, errText := writeResult(guard.Set(rctx, key, tok, markKey(key), strconv.Itoa(cfg.ID)))
	out.emit(event{CS: cs, Ev: evMark, Tok: tok, Res: res, Err: errText, Start: s, End: nowNS()})

	s = nowNS()
	v, err := readInt(rctx, reg, fencedKey(key))
	if err == nil {
		out.emit(event{CS: cs, Ev: evRead, Tok: tok, Val: v, Start: s, End: nowNS()})
	}
	fenced := v
	fencedOK := err == nil && res == resOK
	s = nowNS()
	c, cerr := readInt(rctx, reg, controlKey(key))
	if cerr == nil {
		out.emit(event{CS: cs, Ev: evCRead, Tok: tok, Val: c, Start: s, End: nowNS()})
	}

	hold, kind := cfg.Hold, ""
	if long.Swap(false) {
		hold, kind = cfg.LongHold, "long"
	}
	// The hold's end is fixed before the runner learns of the hold from
	// its event: a SIGSTOP the runner sends then cannot move the end
	// later, and a holder paused past it writes as soon as it resumes.
	end := time.Now().Add(hold)
	u := validUntil(lease)
	out.emit(event{CS: cs, Ev: evHold, Op: kind, Tok: tok, Start: nowNS(), U: u})
	holdUntil(end, cfg.TTL/4, lease, u, func(u int64) { out.emit(event{CS: cs, Ev: evValid, Tok: tok, Start: nowNS(), U: u}) })
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()

	if cerr == nil {
		out.emit(event{CS: cs, Ev: evCall, Op: evCWrite, Tok: tok, Val: c + 1, Start: nowNS(), U: validUntil(lease)})
		s = nowNS()
		werr := reg.Do(wctx, reg.B().Set().Key(controlKey(key)).Value(strconv.FormatInt(c+1, 10)).Build()).Error()
		r, e := resOK, ""
		if werr != nil {
			r, e = resUnknown, werr.Error()
		}
		out.emit(event{CS: cs, Ev: evCWrite, Tok: tok, Val: c + 1, Res: r, Err: e, Start: s, End: nowNS()})
	}
	if fencedOK {
		out.emit(event{CS: cs, Ev: evCall, Op: evWrite, Tok: tok, Val: fenced + 1, Start: nowNS(), U: validUntil(lease)})
		s = nowNS()
		r, e := writeResult(guard.Set(wctx, key, tok, fencedKey(key), strconv.FormatInt(fenced+1, 10)))
		out.emit(event{CS: cs, Ev: evWrite, Tok: tok, Val: fenced + 1, Res: r, Err: e, Start: s, End: nowNS()})
	}

	s = nowNS()
	// Announced before it is sent: a worker killed after the store freed
	// the lock but before its result was written still began its release.
	out.emit(event{CS: cs, Ev: evCall, Op: evReleased, Tok: tok, Start: s})
	relCtx, relCancel := context.WithTimeout(context.Background(), cfg.AcquireTimeout)
	err = lease.Release(relCtx)
	relCancel()
	res = resOK
	errText = ""
	switch {
	case errors.Is(err, turnstile.ErrLockLost), errors.Is(err, turnstile.ErrNotHeld):
		res = "lost"
	case err != nil:
		res, errText = "err", err.Error()
	}
	out.emit(event{CS: cs, Ev: evReleased, Tok: tok, Res: res, Err: errText, Start: s, End: nowNS()})
}

// validUntil is when lease ends at the earliest by its own clock, as a
// Unix time in nanoseconds, or 0 if it has ended. The time is read before
// the validity, so that a pause between the two only makes it earlier.
func validUntil(lease *turnstile.Lease) int64 {
	t := nowNS()
	if left := lease.Validity(); left > 0 {
		return t + int64(left)
	}
	return 0
}

// holdUntil sleeps until end in steps of at most step, and reports each
// later end of the lease (a renewal, not the microseconds validUntil
// varies by) to renewed: the checker learns how long a long holder's
// lease stayed valid. u is the end known before.
func holdUntil(end time.Time, step time.Duration, lease *turnstile.Lease, u int64, renewed func(int64)) {
	step = max(step, time.Millisecond)
	for {
		left := time.Until(end)
		if left <= 0 {
			return
		}
		sleep(context.Background(), min(left, step))
		if v := validUntil(lease); v > u+int64(time.Millisecond) {
			u = v
			renewed(u)
		}
	}
}

// writeResult classifies a fenced write's error.
func writeResult(err error) (res, text string) {
	switch {
	case err == nil:
		return resOK, ""
	case errors.Is(err, fence.ErrStaleToken):
		return resStale, ""
	default:
		return resUnknown, err.Error()
	}
}

// readInt reads a counter; a missing key is 0.
func readInt(ctx context.Context, reg rueidis.Client, key string) (int64, error) {
	s, err := reg.Do(ctx, reg.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// Workload is what a cell's workers do: each loops acquire, hold,
// release until the cell's time is up.
type Workload struct {
	// Name groups cells in reports, e.g. "uncontended" or "herd".
	Name string
	// Concurrency is the number of workers, over all processes.
	Concurrency int
	// HotKeys is how many keys the workers share, each acquisition
	// picking one at random; 0 gives every acquisition a distinct random
	// key (no contention).
	HotKeys int
	// Hold is how long a worker holds each lock before releasing it.
	Hold time.Duration
	// Nodes is the number of independent redis-servers: 1, or more for
	// Redlock; with Cluster, the masters of one Redis Cluster.
	Nodes int
	// Cluster runs the workload on a Redis Cluster of Nodes masters
	// instead of independent servers: the libraries that can
	// (Library.OpenCluster) open one client of the whole cluster.
	Cluster bool
	// Processes spreads the workers over this many child processes, each
	// re-executing the running binary, which must call ServeChild first
	// thing; 0 or 1 runs them in this process.
	Processes int
	// Clients spreads the workers evenly over this many Lockers, each
	// opened with Library.Open (a client of its own, with its own
	// connections, as separate instances of an application have), in
	// one process: worker i uses Locker i·Clients÷Concurrency. 0 or 1 is
	// one Locker per process. With Processes > 1 it counts the Lockers
	// of all processes and must be a multiple of Processes.
	Clients int
}

// ID names the workload uniquely within a run, e.g.
// "contended-8/c=64", "contended-1/c=64/clients=8" or
// "herd/c=500/procs=10".
func (w Workload) ID() string {
	id := w.Name + "/c=" + strconv.Itoa(w.Concurrency)
	if w.Clients > 1 {
		id += "/clients=" + strconv.Itoa(w.Clients)
	}
	if w.Processes > 1 {
		id += "/procs=" + strconv.Itoa(w.Processes)
	}
	return id
}

func (w Workload) check() error {
	switch {
	case w.Name == "":
		return fmt.Errorf("%w: workload without a name", ErrUsage)
	case w.Concurrency < 1:
		return fmt.Errorf("%w: workload %s: concurrency %d, need at least 1", ErrUsage, w.Name, w.Concurrency)
	case w.HotKeys < 0:
		return fmt.Errorf("%w: workload %s: %d hot keys", ErrUsage, w.Name, w.HotKeys)
	case w.Hold < 0:
		return fmt.Errorf("%w: workload %s: negative hold %v", ErrUsage, w.Name, w.Hold)
	case w.Nodes < 1:
		return fmt.Errorf("%w: workload %s: %d nodes, need at least 1", ErrUsage, w.Name, w.Nodes)
	case w.Processes < 0:
		return fmt.Errorf("%w: workload %s: %d processes", ErrUsage, w.Name, w.Processes)
	case w.Processes > 1 && w.Concurrency%w.Processes != 0:
		return fmt.Errorf("%w: workload %s: %d workers do not split evenly over %d processes", ErrUsage, w.Name, w.Concurrency, w.Processes)
	case w.Cluster && w.Nodes < 3:
		return fmt.Errorf("%w: workload %s: a Redis Cluster of %d masters, it needs at least 3", ErrUsage, w.Name, w.Nodes)
	case w.Cluster && w.Processes > 1:
		return fmt.Errorf("%w: workload %s: cluster cells run in one process", ErrUsage, w.Name)
	case w.Clients < 0:
		return fmt.Errorf("%w: workload %s: %d clients", ErrUsage, w.Name, w.Clients)
	case w.Clients > 1 && w.Concurrency%w.Clients != 0:
		return fmt.Errorf("%w: workload %s: %d workers do not split evenly over %d clients", ErrUsage, w.Name, w.Concurrency, w.Clients)
	case w.Clients > 1 && w.Processes > 1 && w.Clients%w.Processes != 0:
		return fmt.Errorf("%w: workload %s: %d clients do not split evenly over %d processes", ErrUsage, w.Name, w.Clients, w.Processes)
	}
	return nil
}

// Cell is one workload run through one library for a fixed time.
type Cell struct {
	Workload Workload
	Library  Library
	// Addrs are the Redis servers (host:port), Workload.Nodes of them.
	Addrs []string
	// Duration is how long the workers run, after a warm-up of two
	// acquisitions per worker on distinct keys that is not measured.
	Duration time.Duration
	// Stats reads the servers' counters before and after the cell; nil
	// reads Redis's INFO commandstats and cpu on Addrs (NewCounter).
	Stats func(addrs []string) (Stats, error)
}

// Stats reads what a store's servers have done so far: their calls by
// command (or RPC method) and their CPU time.
type Stats interface {
	Read(ctx context.Context) (Sample, error)
	Close()
}

func (c Cell) check() error {
	if err := c.Workload.check(); err != nil {
		return err
	}
	switch {
	case c.Library.Name == "" || c.Library.Open == nil:
		return fmt.Errorf("%w: cell %s: library without a name or Open", ErrUsage, c.Workload.ID())
	case len(c.Addrs) != c.Workload.Nodes:
		return fmt.Errorf("%w: cell %s: %d addresses for %d nodes", ErrUsage, c.Workload.ID(), len(c.Addrs), c.Workload.Nodes)
	case c.Workload.Cluster && c.Library.OpenCluster == nil:
		return fmt.Errorf("%w: cell %s: %s does not run on a Redis Cluster", ErrUsage, c.Workload.ID(), c.Library.Name)
	case c.Workload.Nodes > 1 && !c.Workload.Cluster && !c.Library.MultiNode:
		return fmt.Errorf("%w: cell %s: %s does not run over several nodes", ErrUsage, c.Workload.ID(), c.Library.Name)
	case c.Duration <= 0:
		return fmt.Errorf("%w: cell %s: duration %v", ErrUsage, c.Workload.ID(), c.Duration)
	}
	return nil
}

// Run runs the cell: it opens the library (a Locker per client), warms
// it up, reads the servers' command counters, runs the workers for the
// cell's duration, reads the counters again and closes the library. A library that fails
// an acquisition keeps running; the failures are counted in
// Result.Errors, the first one kept in Result.Error.
func Run(ctx context.Context, c Cell) (Result, error) {
	if err := c.check(); err != nil {
		return Result{}, err
	}
	var counter Stats
	var err error
	if c.Stats != nil {
		counter, err = c.Stats(c.Addrs)
	} else {
		counter, err = NewCounter(c.Addrs)
	}
	if err != nil {
		return Result{}, err
	}
	defer counter.Close()
	prefix := "bench:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
	if c.Workload.Processes > 1 {
		return runChildren(ctx, c, counter, prefix)
	}
	open := c.Library.Open
	if c.Workload.Cluster {
		open = c.Library.OpenCluster
	}
	lks, err := openLockers(ctx, c.Library.Name, open, c.Addrs, c.Workload.Concurrency, c.Workload.Clients)
	if err != nil {
		return Result{}, fmt.Errorf("workload: %s: %w", c.Workload.ID(), err)
	}
	defer closeLockers(lks)
	if err := warmUp(ctx, lks, prefix, c.Workload.Concurrency); err != nil {
		return Result{}, fmt.Errorf("workload: %s: %s warm-up: %w", c.Workload.ID(), c.Library.Name, err)
	}
	before, err := counter.Read(ctx)
	if err != nil {
		return Result{}, err
	}
	t := drive(ctx, lks, c.Workload, prefix, c.Workload.Concurrency, c.Duration)
	after, err := readAfter(ctx, counter)
	if err != nil {
		return Result{}, err
	}
	return newResult(c, t, after.Sub(before)), nil
}

// openLockers opens max(clients, 1) Lockers of the library name with
// open, each for its share of workers workers.
func openLockers(ctx context.Context, name string, open func(context.Context, []string, int) (Locker, error), addrs []string, workers, clients int) ([]Locker, error) {
	n := max(clients, 1)
	lks := make([]Locker, 0, n)
	for range n {
		lk, err := open(ctx, addrs, workers/n)
		if err != nil {
			closeLockers(lks)
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		lks = append(lks, lk)
	}
	return lks, nil
}

func closeLockers(lks []Locker) {
	for _, lk := range lks {
		_ = lk.Close()
	}
}

// lockerOf is the Locker of worker i of workers: the workers are split
// over lks in equal runs.
func lockerOf(lks []Locker, i, workers int) Locker { return lks[i*len(lks)/workers] }

// readAfter reads the closing counters also when ctx ended the cell
// early, so that an interrupted cell still reports what it measured.
func readAfter(ctx context.Context, counter Stats) (Sample, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return counter.Read(rctx)
}

// warmUp has every worker take and release two locks on distinct keys,
// each through its own Locker of lks, so that connections are open and
// scripts loaded before the counters are read.
func warmUp(ctx context.Context, lks []Locker, prefix string, workers int) error {
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lk := lockerOf(lks, w, workers)
		wg.Go(func() {
			for i := range 2 {
				// A pair that fails once (a node timeout on a busy
				// machine) is tried again on a new key: the warm-up only
				// readies connections and scripts. A store that fails
				// every attempt fails the workload.
				for attempt := range warmUpAttempts {
					err := warmPair(ctx, lk, prefix+"warm:"+strconv.Itoa(w)+":"+strconv.Itoa(i)+":"+strconv.Itoa(attempt))
					errs[w] = err
					if err == nil || ctx.Err() != nil {
						break
					}
				}
				if errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// warmUpAttempts is how often the warm-up tries one lock and release
// before it gives up on the store.
const warmUpAttempts = 3

// warmPair takes key and releases it.
func warmPair(ctx context.Context, lk Locker, key string) error {
	h, err := lk.Acquire(ctx, key)
	if err != nil {
		return err
	}
	// Released also when ctx ends meanwhile: a lock taken must not stay
	// held until its TTL.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	return h.Release(rctx)
}

// tally is what a set of workers measured; it is also the message a
// child process sends back.
type tally struct {
	Latencies []int64 `json:"latencies"` // ns per acquisition
	PerWorker []int64 `json:"per_worker"`
	HoldNanos int64   `json:"hold_ns"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Start     int64   `json:"start"` // wall clock, Unix ns
	End       int64   `json:"end"`   // last release done, Unix ns
}

// releaseTimeout bounds a Release, which runs on a context of its own so
// that a lock held when the cell's time runs out is still released.
const releaseTimeout = 5 * time.Second

// drive runs workers workers for d, split over lks.
func drive(ctx context.Context, lks []Locker, w Workload, prefix string, workers int, d time.Duration) tally {
	type worker struct {
		lat      []int64
		n        int64
		hold     time.Duration
		errs     int64
		firstErr error
		end      time.Time
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	ws := make([]worker, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range ws {
		lk := lockerOf(lks, i, workers)
		wg.Go(func() {
			me := &ws[i]
			r := rand.New(rand.NewPCG(rand.Uint64(), uint64(i)))
			fail := func(err error) {
				me.errs++
				if me.firstErr == nil {
					me.firstErr = err
				}
			}
			for ctx.Err() == nil {
				var key string
				if w.HotKeys > 0 {
					key = prefix + "hot:" + strconv.Itoa(r.IntN(w.HotKeys))
				} else {
					key = prefix + strconv.FormatUint(r.Uint64(), 36)
				}
				t0 := time.Now()
				h, err := lk.Acquire(ctx, key)
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					fail(err)
					continue
				}
				got := time.Now()
				me.lat = append(me.lat, int64(got.Sub(t0)))
				if w.Hold > 0 {
					time.Sleep(w.Hold)
				}
				rel := time.Now()
				me.hold += rel.Sub(got)
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
				if err := h.Release(rctx); err != nil {
					fail(fmt.Errorf("release: %w", err))
				}
				rcancel()
				me.n++
				me.end = time.Now()
			}
		})
	}
	wg.Wait()
	t := tally{PerWorker: make([]int64, workers), Start: start.UnixNano(), End: start.UnixNano()}
	for i, me := range ws {
		t.Latencies = append(t.Latencies, me.lat...)
		t.PerWorker[i] = me.n
		t.HoldNanos += int64(me.hold)
		t.Errors += me.errs
		if me.firstErr != nil && t.FirstErr == "" {
			t.FirstErr = me.firstErr.Error()
		}
		if !me.end.IsZero() {
			t.End = max(t.End, me.end.UnixNano())
		}
	}
	return t
}

// merge adds o, measured by other workers of the same cell, to t.
func (t *tally) merge(o tally) {
	t.Latencies = append(t.Latencies, o.Latencies...)
	t.PerWorker = append(t.PerWorker, o.PerWorker...)
	t.HoldNanos += o.HoldNanos
	t.Errors += o.Errors
	if t.FirstErr == "" {
		t.FirstErr = o.FirstErr
	}
	if t.Start == 0 || (o.Start != 0 && o.Start < t.Start) {
		t.Start = o.Start
	}
	t.End = max(t.End, o.End)
}

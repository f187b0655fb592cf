//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile"
)

// The image-resizing incident (jobs longer than a fixed TTL, see the
// README's demo table), time scaled by 1/25: a fixed
// 5 s TTL becomes 200 ms (turnstile.MinTTL), jobs of 0.5-30 s become
// 20-1200 ms.
const (
	longScale   = 25
	longTTL     = 5 * time.Second / longScale
	longServers = 3
)

// longJobs are the jobs' durations before scaling.
var longJobs = []time.Duration{500 * time.Millisecond, 30 * time.Second, 2 * time.Second, 12 * time.Second, 4 * time.Second, 8 * time.Second}

// longTally is what the jobs of one variant came to.
type longTally struct {
	mu       sync.Mutex
	overlaps int    // jobs whose file another job wrote while they ran
	lost     int    // jobs told their lease was lost, which stopped
	expired  int    // releases that found the lock already expired
	example  string // the first overlap
	failed   int
	firstErr string
}

// runLongJob runs the jobs on three "servers" (Clients) with a fixed TTL,
// then with the watchdog renewing it.
func runLongJob(ctx context.Context, env *environment) ([]result, error) {
	return runVariants(ctx, env, []string{"naive", "watchdog"}, runLongVariant)
}

func runLongVariant(ctx context.Context, env *environment, variant string) (result, error) {
	dir, err := os.MkdirTemp("", "turnstile-demo-images-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "image-7.jpg")
	key := "lock:image:7:" + variant + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	opts := []turnstile.Option{turnstile.WithTTL(longTTL),
		turnstile.WithBackoff(turnstile.Exponential{Base: 2 * time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: -1})}
	if variant == "naive" {
		opts = append(opts, turnstile.WithoutWatchdog())
	}
	clients := make([]*turnstile.Client, longServers)
	for i := range clients {
		c, err := env.newClient(append(opts, turnstile.WithInstanceID("resizer-"+strconv.Itoa(i+1)))...)
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		clients[i] = c
	}
	env.progress("long-job %s: %d jobs of %v (scaled 1/%d) on %d servers, TTL %v%s", variant, len(longJobs), scaledJobs(), longScale, longServers, longTTL,
		map[bool]string{true: " without renewal", false: " renewed every TTL/3"}[variant == "naive"])

	t := &longTally{}
	start := time.Now()
	var wg sync.WaitGroup
	for i, d := range longJobs {
		wg.Go(func() {
			err := longJob(ctx, clients[i%len(clients)], key, file, i+1, d/longScale, variant == "naive", t)
			if err != nil {
				t.mu.Lock()
				countFailure(&t.failed, &t.firstErr, err)
				t.mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)

	r := result{Variant: variant, Naive: variant == "naive"}
	r.OK = t.overlaps == 0 && t.failed == 0
	switch {
	case t.overlaps > 0:
		r.Summary = fmt.Sprintf("%d of %d jobs had their file overwritten mid-job (%s); %d locks had expired at release", t.overlaps, len(longJobs), t.example, t.expired)
	case r.OK:
		r.Summary = fmt.Sprintf("%d jobs, none overlapped; longest held %v under a %v TTL", len(longJobs), scaledMax(), longTTL)
	default:
		r.Summary = fmt.Sprintf("%d jobs failed: %s", t.failed, t.firstErr)
	}
	if t.lost > 0 {
		r.Summary += fmt.Sprintf("; %d jobs were told their lease was lost and stopped", t.lost)
	}
	r.add("store", "redis")
	r.add("jobs", len(longJobs))
	r.add("ttl_ms", longTTL.Milliseconds())
	r.add("overlaps", t.overlaps)
	r.add("expired_at_release", t.expired)
	r.add("lost", t.lost)
	r.add("failed", t.failed)
	r.add("seconds", elapsed.Seconds())
	return r, nil
}

// longJob resizes the image under the lock: it writes its id into the
// file, works for d, and reads the file back. Another id there means
// another job wrote the same file while this one ran.
func longJob(ctx context.Context, c *turnstile.Client, key, file string, id int, d time.Duration, naive bool, t *longTally) error {
	l, err := c.Acquire(ctx, key)
	if err != nil {
		return err
	}
	mine := "job " + strconv.Itoa(id)
	if err := os.WriteFile(file, []byte(mine), 0o644); err != nil {
		_ = l.Release(ctx)
		return err
	}
	work := ctx
	if !naive {
		// The holder listens to its lease: if it is lost, it stops.
		work = l.Context()
	}
	werr := sleepCtx(work, d)
	got, rerr := os.ReadFile(file)
	relErr := l.Release(context.WithoutCancel(ctx))

	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case werr != nil:
		t.lost++ // stopped before finishing: its result is not used
	case rerr != nil:
		return rerr
	case string(got) != mine:
		t.overlaps++
		if t.example == "" {
			t.example = fmt.Sprintf("job %d (%v) found %q in its file", id, d, got)
		}
	}
	if errors.Is(relErr, turnstile.ErrNotHeld) {
		t.expired++
	} else if relErr != nil {
		return relErr
	}
	return nil
}

func scaledJobs() []time.Duration {
	out := make([]time.Duration, len(longJobs))
	for i, d := range longJobs {
		out[i] = d / longScale
	}
	return out
}

func scaledMax() time.Duration {
	var m time.Duration
	for _, d := range longJobs {
		m = max(m, d/longScale)
	}
	return m
}

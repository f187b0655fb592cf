//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile/claim"
)

// The job queue: workers take jobs from one table.
const (
	jobsCount   = 200
	jobsWorkers = 4
	jobsBatch   = 5
	// jobsGap is the time the naive worker spends between finding the
	// first pending job and marking it taken: the window in which other
	// workers find the same job.
	jobsGap = time.Millisecond
	// The crashed worker: its lease, and the jobs in that run.
	jobsLease      = 300 * time.Millisecond
	jobsCrashCount = 10
)

// jobsTally counts how often each job was run and completed.
type jobsTally struct {
	mu       sync.Mutex
	runs     map[int64]int
	refused  int64 // late Completes refused
	failed   int64
	firstErr string
}

func newJobsTally() *jobsTally { return &jobsTally{runs: map[int64]int{}} }

func (t *jobsTally) ran(id int64) {
	t.mu.Lock()
	t.runs[id]++
	t.mu.Unlock()
}

func (t *jobsTally) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	countFailure(&t.failed, &t.firstErr, err)
}

// counts returns how many jobs ran, ran more than once, and never ran.
func (t *jobsTally) counts(jobs int) (ran, twice, never int64) {
	for _, n := range t.runs {
		ran += int64(n)
		if n > 1 {
			twice++
		}
	}
	return ran, twice, int64(jobs - len(t.runs))
}

// runJobs runs every variant of the job queue, on PostgreSQL.
func runJobs(ctx context.Context, env *environment) ([]result, error) {
	if env.pool == nil {
		skip := "jobs: skipped: FOR UPDATE SKIP LOCKED needs PostgreSQL (or MySQL 8 / MariaDB 10.6), and this run has no PostgreSQL and the demo starts no MySQL"
		env.progress("%s", skip)
		env.notes = append(env.notes, skip)
		return nil, nil
	}
	if err := claim.Migrate(ctx, env.pool); err != nil {
		return nil, err
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var rs []result
	for _, v := range []struct {
		name string
		run  func(context.Context, *environment, string) (result, error)
	}{
		{"naive", runNaiveJobs},
		{"skip-locked", runSkipLockedJobs},
		{"crashed-worker", runCrashedWorker},
	} {
		r, err := v.run(ctx, env, run)
		if err != nil {
			return rs, fmt.Errorf("%s: %w", v.name, err)
		}
		r.Variant, r.Naive = v.name, v.name == "naive"
		rs = append(rs, r)
	}
	return rs, nil
}

// runNaiveJobs is the worker loop that runs jobs twice: select the first
// pending job; then, in another statement, mark it taken.
func runNaiveJobs(ctx context.Context, env *environment, run string) (result, error) {
	if _, err := env.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS turnstile_demo_jobs (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run text NOT NULL,
		status text NOT NULL DEFAULT 'pending', worker text)`); err != nil {
		return result{}, err
	}
	if _, err := env.pool.Exec(ctx, `INSERT INTO turnstile_demo_jobs (run) SELECT $1 FROM generate_series(1, $2)`, run, jobsCount); err != nil {
		return result{}, err
	}
	env.progress("jobs naive: %d workers take %d jobs: select the first pending, then mark it taken...", jobsWorkers, jobsCount)
	t := newJobsTally()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range jobsWorkers {
		worker := "worker-" + strconv.Itoa(w+1)
		wg.Go(func() {
			for ctx.Err() == nil {
				var id int64
				err := env.pool.QueryRow(ctx, `SELECT id FROM turnstile_demo_jobs WHERE run = $1 AND status = 'pending' ORDER BY id LIMIT 1`, run).Scan(&id)
				if errors.Is(err, pgx.ErrNoRows) {
					return
				}
				if err == nil {
					err = sleepCtx(ctx, jobsGap)
				}
				if err == nil {
					_, err = env.pool.Exec(ctx, `UPDATE turnstile_demo_jobs SET status = 'taken', worker = $2 WHERE id = $1`, id, worker)
				}
				if err == nil {
					t.ran(id)
					_, err = env.pool.Exec(ctx, `UPDATE turnstile_demo_jobs SET status = 'done' WHERE id = $1`, id)
				}
				if err != nil {
					t.fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	return jobsResult(t, jobsCount, time.Since(start)), nil
}

// runSkipLockedJobs: the same workers on claim's queue, Claim(5) and
// Complete.
func runSkipLockedJobs(ctx context.Context, env *environment, run string) (result, error) {
	q, err := claim.NewPostgresJobs(env.pool, "demo:jobs:"+run)
	if err != nil {
		return result{}, err
	}
	if _, err := q.Enqueue(ctx, make([][]byte, jobsCount)...); err != nil {
		return result{}, err
	}
	env.progress("jobs skip-locked: %d workers claim %d jobs, %d at a time...", jobsWorkers, jobsCount, jobsBatch)
	t := newJobsTally()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range jobsWorkers {
		worker := "worker-" + strconv.Itoa(w+1)
		wg.Go(func() { work(ctx, q, worker, t, func() bool { return true }) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	return jobsResult(t, jobsCount, time.Since(start)), nil
}

// work claims and completes jobs until a Claim finds none and more says
// to stop.
func work(ctx context.Context, q *claim.PostgresJobs, worker string, t *jobsTally, done func() bool) {
	for ctx.Err() == nil {
		jobs, err := q.Claim(ctx, worker, jobsBatch)
		if err != nil {
			t.fail(err)
			return
		}
		if len(jobs) == 0 {
			if done() {
				return
			}
			_ = sleepCtx(ctx, 20*time.Millisecond)
			continue
		}
		for _, j := range jobs {
			t.ran(j.ID)
			if err := q.Complete(ctx, j); err != nil {
				t.fail(err)
			}
		}
	}
}

// runCrashedWorker: a worker claims jobs and dies; after its lease two
// others take its jobs, and its late Completes are refused.
func runCrashedWorker(ctx context.Context, env *environment, run string) (result, error) {
	q, err := claim.NewPostgresJobs(env.pool, "demo:jobs:crash:"+run, claim.WithLease(jobsLease))
	if err != nil {
		return result{}, err
	}
	ids, err := q.Enqueue(ctx, make([][]byte, jobsCrashCount)...)
	if err != nil {
		return result{}, err
	}
	crashed, err := q.Claim(ctx, "worker-crashed", jobsCrashCount/2)
	if err != nil {
		return result{}, err
	}
	env.progress("jobs crashed-worker: worker-crashed claimed %d of %d jobs with a %v lease and stopped; 2 workers take the rest...", len(crashed), jobsCrashCount, jobsLease)
	t := newJobsTally()
	start := time.Now()
	allDone := func() bool {
		var left int
		err := env.pool.QueryRow(ctx, `SELECT count(*) FROM turnstile_jobs WHERE queue = $1 AND status <> 'done'`, "demo:jobs:crash:"+run).Scan(&left)
		return err != nil || left == 0
	}
	// The live workers claim with the default lease, so that a busy
	// machine cannot make their own claims pass before they complete.
	live, err := claim.NewPostgresJobs(env.pool, "demo:jobs:crash:"+run)
	if err != nil {
		return result{}, err
	}
	var wg sync.WaitGroup
	for w := range 2 {
		worker := "worker-" + strconv.Itoa(w+1)
		wg.Go(func() { work(ctx, live, worker, t, allDone) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	// The crashed worker comes back and reports its jobs done.
	var refused []string
	for _, j := range crashed {
		err := q.Complete(ctx, j)
		var lost *claim.LostError
		switch {
		case errors.As(err, &lost):
			t.refused++
			refused = append(refused, fmt.Sprintf("job %d attempt %d < %d", j.ID, j.Attempt, lost.NowAttempt))
		case err == nil:
			t.ran(j.ID) // accepted: a second completion
		default:
			t.fail(err)
		}
	}
	var retaken int64
	for _, j := range crashed {
		if now, err := q.Lookup(ctx, j.ID); err == nil && now.Attempt == 2 && now.Worker != "worker-crashed" {
			retaken++
		}
	}
	r := jobsResult(t, len(ids), elapsed)
	base := r.Summary
	r.OK = r.OK && t.refused == int64(len(crashed)) && retaken == int64(len(crashed))
	r.Summary = fmt.Sprintf("worker-crashed's %d jobs retaken after its %v lease as attempt 2; its late Completes refused (%d of %d", len(crashed), jobsLease, t.refused, len(crashed))
	if len(refused) > 0 {
		r.Summary += ", e.g. " + refused[0]
	}
	r.Summary += "); " + base
	r.add("crashed_claims", len(crashed))
	r.add("retaken", retaken)
	r.add("late_completes_refused", t.refused)
	return r, nil
}

// jobsResult is the verdict on how often each of jobs jobs ran.
func jobsResult(t *jobsTally, jobs int, elapsed time.Duration) result {
	ran, twice, never := t.counts(jobs)
	r := result{}
	r.OK = ran == int64(jobs) && twice == 0 && never == 0 && t.failed == 0
	switch {
	case twice > 0:
		r.Summary = fmt.Sprintf("%s of %s jobs ran more than once: %s runs by %d workers", num(twice), num(int64(jobs)), num(ran), jobsWorkers)
	case r.OK:
		r.Summary = fmt.Sprintf("every job ran exactly once: %s runs of %s jobs", num(ran), num(int64(jobs)))
	default:
		r.Summary = fmt.Sprintf("%s runs, %s jobs never ran, %s failed", num(ran), num(never), num(t.failed))
	}
	r.firstError(t.firstErr)
	r.add("store", "postgres")
	r.add("workers", jobsWorkers)
	r.add("jobs", jobs)
	r.add("runs", ran)
	r.add("ran_twice", twice)
	r.add("never_ran", never)
	r.add("failed", t.failed)
	r.add("seconds", elapsed.Seconds())
	return r
}

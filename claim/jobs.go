package claim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/turnstilelock/turnstile"
)

// Status is where a job stands.
type Status string

// The states of a job: ready to be claimed (now or at its due time),
// claimed by a worker until its lease passes, done.
const (
	StatusReady   Status = "ready"
	StatusClaimed Status = "claimed"
	StatusDone    Status = "done"
)

// A Job is one job of a queue. Claim returns the jobs it claimed; the
// ID and Attempt of such a Job are its claim, which Complete and Release
// check.
type Job struct {
	ID      int64
	Queue   string
	Payload []byte
	Status  Status
	// Attempt counts the claims of the job: 1 on its first claim. It is
	// the claim's fencing token: a claim made after this one's lease
	// passed has a higher attempt, and calls with this one are refused.
	Attempt int64
	// Worker is who holds the job's claim, or who completed it; empty
	// while ready.
	Worker string
	// Due is when the job may be claimed (again): the end of the lease
	// while claimed, the time it is ready from while ready; zero once
	// done. It is read by the database's clock.
	Due time.Time
}

// Jobs is a queue of jobs in a database that workers claim with
// SELECT ... FOR UPDATE SKIP LOCKED: PostgresJobs and MySQLJobs implement
// it.
type Jobs interface {
	// Enqueue adds one ready job per payload and returns their ids, in
	// the payloads' order.
	Enqueue(ctx context.Context, payloads ...[]byte) ([]int64, error)
	// Claim claims up to n jobs that are due for worker, each for one
	// lease, and returns them by id; the oldest due are taken first.
	// Finding none due is no error. Jobs that other workers' claims are
	// taking at that moment are skipped, not waited for.
	Claim(ctx context.Context, worker string, n int) ([]Job, error)
	// Heartbeat extends every claim that worker holds by one lease from
	// now, and returns the ids of the jobs it still holds.
	Heartbeat(ctx context.Context, worker string) ([]int64, error)
	// Complete marks a claimed job done. It refuses, with a *LostError
	// (ErrClaimLost), a claim that is no longer the job's own.
	Complete(ctx context.Context, job Job) error
	// Release gives a claimed job back, ready again after delay (0: at
	// once), and refuses a lost claim as Complete does.
	Release(ctx context.Context, job Job, delay time.Duration) error
	// Lookup returns the job id as it is now, or ErrUnknownJob.
	Lookup(ctx context.Context, id int64) (Job, error)
}

var (
	_ Jobs = (*PostgresJobs)(nil)
	_ Jobs = (*MySQLJobs)(nil)
)

// Defaults and limits of a job queue.
const (
	// DefaultLease is how long a claim holds a job without a heartbeat.
	DefaultLease = 30 * time.Second
	// MinLease and MaxLease bound WithLease.
	MinLease = time.Millisecond
	MaxLease = 24 * time.Hour
	// MaxClaim is the most jobs one Claim takes.
	MaxClaim = 1000
	// MaxDelay is the longest delay Release accepts.
	MaxDelay = 366 * 24 * time.Hour
)

// A JobsOption configures a PostgresJobs or a MySQLJobs.
type JobsOption func(*jobsConfig) error

type jobsConfig struct {
	lease time.Duration
}

// WithLease sets how long a claim, or a heartbeat, holds a job: once it
// passes without a heartbeat, the job is due again and the next Claim of
// any worker takes it, with its attempt one higher. It must be in
// [MinLease, MaxLease]. Default DefaultLease (30 s).
//
// Pick it well above a worker's heartbeat interval (three times is
// usual) and above the longest pause a worker may take (a GC, a stalled
// disk): a worker that misses its heartbeats past the lease loses its
// jobs to others, and learns it from Heartbeat, Complete or Release.
func WithLease(d time.Duration) JobsOption {
	return func(c *jobsConfig) error {
		if d < MinLease || d > MaxLease {
			return fmt.Errorf("%w: lease %v is outside [%v, %v]", turnstile.ErrInvalidOption, d, MinLease, MaxLease)
		}
		c.lease = d
		return nil
	}
}

func newJobsConfig(queue string, opts []JobsOption) (jobsConfig, error) {
	c := jobsConfig{lease: DefaultLease}
	if err := checkName("queue", queue); err != nil {
		return c, err
	}
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("%w: nil jobs option", turnstile.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// checkClaim refuses a Claim's worker and count.
func checkClaim(worker string, n int) error {
	if err := checkName("worker", worker); err != nil {
		return err
	}
	if n < 1 || n > MaxClaim {
		return fmt.Errorf("%w: claim of %d jobs is outside [1, %d]", ErrInvalidArgument, n, MaxClaim)
	}
	return nil
}

// checkJob refuses a claim to complete or release that no Claim returned.
func checkJob(job Job, queue string) error {
	if job.ID <= 0 || job.Attempt <= 0 {
		return fmt.Errorf("%w: job %d attempt %d is not a claim (ids and attempts start at 1)", ErrInvalidArgument, job.ID, job.Attempt)
	}
	if job.Queue != "" && job.Queue != queue {
		return fmt.Errorf("%w: job %d is of queue %q, not %q", ErrInvalidArgument, job.ID, job.Queue, queue)
	}
	return nil
}

// checkDelay refuses a Release's delay.
func checkDelay(d time.Duration) error {
	if d < 0 || d > MaxDelay {
		return fmt.Errorf("%w: delay %v is outside [0, %v]", ErrInvalidArgument, d, MaxDelay)
	}
	return nil
}

// checkPayloads refuses an empty batch.
func checkPayloads(payloads [][]byte) error {
	if len(payloads) == 0 {
		return fmt.Errorf("%w: no payloads to enqueue", ErrInvalidArgument)
	}
	return nil
}

// settled returns the outcome of a Complete or Release that changed no
// row, from the job's state now: success when the same claim already did
// it (the call is a retry whose first reply was lost), else a *LostError.
func settled(job, now Job, want Status) error {
	if now.Status == want && now.Attempt == job.Attempt {
		return nil
	}
	return &LostError{ID: job.ID, Attempt: job.Attempt, Status: now.Status, NowAttempt: now.Attempt, NowWorker: now.Worker}
}

// sortJobs orders claimed jobs by id.
func sortJobs(jobs []Job) {
	slices.SortFunc(jobs, func(a, b Job) int { return cmp.Compare(a.ID, b.ID) })
}

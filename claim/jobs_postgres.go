package claim

import (
	"context"
	_ "embed" // the SQL
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
)

var (
	//go:embed sql/postgres_claim.sql
	postgresClaimSQL string
	//go:embed sql/postgres_complete.sql
	postgresCompleteSQL string
	//go:embed sql/postgres_release.sql
	postgresReleaseSQL string
	//go:embed sql/postgres_heartbeat.sql
	postgresHeartbeatSQL string
)

const (
	postgresEnqueueSQL = `INSERT INTO turnstile_jobs (queue, payload, due_at)
SELECT $1, p.payload, now() FROM unnest($2::bytea[]) WITH ORDINALITY AS p(payload, n) ORDER BY p.n
RETURNING id`
	postgresJobSQL = `SELECT payload, status, attempt, coalesce(worker, ''), due_at
  FROM turnstile_jobs WHERE id = $1 AND queue = $2`
)

// PostgresJobs is a job queue in table turnstile_jobs on PostgreSQL (see
// Migrate). Every call is one statement and one round trip: a Claim is
// one UPDATE of the rows a SELECT ... FOR UPDATE SKIP LOCKED picked
// (sql/postgres_claim.sql), so concurrent workers each take jobs no other
// worker holds, and never wait for each other's rows.
//
// Guarantee: a job is held by at most one claim at a time, and only the
// claim that holds it can complete it. A claim holds its job until its
// lease passes (WithLease; Heartbeat extends it); after that the next
// Claim of any worker takes it, as attempt+1, and from then on Complete,
// Release and Heartbeat with the old claim are refused with ErrClaimLost.
// A worker that stopped past its lease may still be running the job's
// work while another worker does it again: the job's effects must
// tolerate that (be idempotent, or check the attempt as a fencing token
// where they are written), just as with any lease. Completion itself is
// exactly once.
//
// Leases are measured by the database's clock, never the workers'.
//
// A PostgresJobs is safe for concurrent use when its Querier is (a pool
// is).
type PostgresJobs struct {
	db    Querier
	queue string
	cfg   jobsConfig
}

// NewPostgresJobs returns the jobs of queue in db's turnstile_jobs table.
// Run Migrate once before using it; NewPostgresJobs makes no round trip.
func NewPostgresJobs(db Querier, queue string, opts ...JobsOption) (*PostgresJobs, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil querier", turnstile.ErrInvalidOption)
	}
	cfg, err := newJobsConfig(queue, opts)
	if err != nil {
		return nil, err
	}
	return &PostgresJobs{db: db, queue: queue, cfg: cfg}, nil
}

// Enqueue implements Jobs.Enqueue in one statement.
func (q *PostgresJobs) Enqueue(ctx context.Context, payloads ...[]byte) ([]int64, error) {
	if err := checkPayloads(payloads); err != nil {
		return nil, err
	}
	// bytea NOT NULL: a nil payload is an empty one.
	ps := make([][]byte, len(payloads))
	for i, p := range payloads {
		ps[i] = p
		if p == nil {
			ps[i] = []byte{}
		}
	}
	rows, err := q.db.Query(ctx, postgresEnqueueSQL, q.queue, ps)
	if err != nil {
		return nil, fmt.Errorf("claim: enqueue %d jobs: %w", len(ps), err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("claim: enqueue %d jobs: %w", len(ps), err)
	}
	// Identities are drawn in insertion order, which is the payloads'.
	slices.Sort(ids)
	return ids, nil
}

// Claim implements Jobs.Claim in one statement.
func (q *PostgresJobs) Claim(ctx context.Context, worker string, n int) ([]Job, error) {
	if err := checkClaim(worker, n); err != nil {
		return nil, err
	}
	rows, err := q.db.Query(ctx, postgresClaimSQL, q.queue, worker, n, q.cfg.lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("claim: claim %d jobs for %q: %w", n, worker, err)
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Job, error) {
		j := Job{Queue: q.queue, Status: StatusClaimed, Worker: worker}
		err := row.Scan(&j.ID, &j.Payload, &j.Attempt, &j.Due)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: claim %d jobs for %q: %w", n, worker, err)
	}
	sortJobs(jobs)
	return jobs, nil
}

// Heartbeat implements Jobs.Heartbeat in one statement.
func (q *PostgresJobs) Heartbeat(ctx context.Context, worker string) ([]int64, error) {
	if err := checkName("worker", worker); err != nil {
		return nil, err
	}
	rows, err := q.db.Query(ctx, postgresHeartbeatSQL, q.queue, worker, q.cfg.lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("claim: heartbeat of %q: %w", worker, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("claim: heartbeat of %q: %w", worker, err)
	}
	slices.Sort(ids)
	return ids, nil
}

// Complete implements Jobs.Complete: one statement, and one more to say
// why when it is refused.
func (q *PostgresJobs) Complete(ctx context.Context, job Job) error {
	if err := checkJob(job, q.queue); err != nil {
		return err
	}
	tag, err := q.db.Exec(ctx, postgresCompleteSQL, job.ID, q.queue, job.Attempt)
	if err != nil {
		return fmt.Errorf("claim: complete job %d: %w", job.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	now, err := q.Lookup(ctx, job.ID)
	if err != nil {
		return err
	}
	return settled(job, now, StatusDone)
}

// Release implements Jobs.Release: one statement, and one more to say
// why when it is refused.
func (q *PostgresJobs) Release(ctx context.Context, job Job, delay time.Duration) error {
	if err := checkJob(job, q.queue); err != nil {
		return err
	}
	if err := checkDelay(delay); err != nil {
		return err
	}
	tag, err := q.db.Exec(ctx, postgresReleaseSQL, job.ID, q.queue, job.Attempt, delay.Microseconds())
	if err != nil {
		return fmt.Errorf("claim: release job %d: %w", job.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	now, err := q.Lookup(ctx, job.ID)
	if err != nil {
		return err
	}
	return settled(job, now, StatusReady)
}

// Lookup implements Jobs.Lookup.
func (q *PostgresJobs) Lookup(ctx context.Context, id int64) (Job, error) {
	j := Job{ID: id, Queue: q.queue}
	var due *time.Time
	err := q.db.QueryRow(ctx, postgresJobSQL, id, q.queue).Scan(&j.Payload, &j.Status, &j.Attempt, &j.Worker, &due)
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, fmt.Errorf("%w: %d in queue %q", ErrUnknownJob, id, q.queue)
	}
	if err != nil {
		return Job{}, fmt.Errorf("claim: look up job %d: %w", id, err)
	}
	if due != nil {
		j.Due = *due
	}
	return j, nil
}

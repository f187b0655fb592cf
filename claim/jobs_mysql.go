package claim

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/turnstilelock/turnstile"
)

var (
	mysqlPickSQL = "SELECT id, payload, attempt, " + micros("UTC_TIMESTAMP(6)") + ` FROM turnstile_jobs
 WHERE queue = ? AND due_at <= UTC_TIMESTAMP(6)
 ORDER BY due_at, id
 LIMIT ?
   FOR UPDATE SKIP LOCKED`
	mysqlJobSQL = "SELECT payload, status, attempt, COALESCE(worker, ''), " + micros("due_at") +
		" FROM turnstile_jobs WHERE id = ? AND queue = ?"
)

const (
	mysqlEnqueueSQL  = "INSERT INTO turnstile_jobs (queue, payload, status, due_at, enqueued_at) VALUES (?, ?, 'ready', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"
	mysqlCompleteSQL = `UPDATE turnstile_jobs SET status = 'done', due_at = NULL, done_at = UTC_TIMESTAMP(6)
 WHERE id = ? AND queue = ? AND attempt = ? AND status = 'claimed'`
	mysqlReleaseSQL = `UPDATE turnstile_jobs SET status = 'ready', worker = NULL, due_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
 WHERE id = ? AND queue = ? AND attempt = ? AND status = 'claimed'`
	mysqlHeldSQL = "SELECT id FROM turnstile_jobs WHERE queue = ? AND worker = ? AND status = 'claimed' FOR UPDATE"
)

// MySQLJobs is a job queue in table turnstile_jobs on MySQL 8.0 or later
// or MariaDB 10.6 or later (see MigrateMySQL), with the same guarantee as
// PostgresJobs. A Claim is one READ COMMITTED transaction of three
// statements: SELECT ... FOR UPDATE SKIP LOCKED picks due jobs that no
// other claim has locked, an UPDATE claims them, COMMIT. READ COMMITTED
// keeps InnoDB from locking the gaps between the rows it reads, which
// would hold up Enqueue while a claim runs.
//
// Leases are measured by the database's clock (UTC_TIMESTAMP), never the
// workers'.
//
// A MySQLJobs is safe for concurrent use.
type MySQLJobs struct {
	db    *sql.DB
	queue string
	cfg   jobsConfig
}

// NewMySQLJobs returns the jobs of queue in db's turnstile_jobs table.
// Run MigrateMySQL once before using it; NewMySQLJobs makes no round
// trip.
func NewMySQLJobs(db *sql.DB, queue string, opts ...JobsOption) (*MySQLJobs, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil sql.DB", turnstile.ErrInvalidOption)
	}
	cfg, err := newJobsConfig(queue, opts)
	if err != nil {
		return nil, err
	}
	return &MySQLJobs{db: db, queue: queue, cfg: cfg}, nil
}

// deadlockRetries is how many times inTx runs a transaction again that
// InnoDB chose as a deadlock's victim (and rolled back): a Heartbeat
// locks a worker's rows in id order while a Claim may be taking the same
// expired rows in due order.
const deadlockRetries = 3

// inTx runs f in a READ COMMITTED transaction and commits it; f must
// start over (reset what it gathered) each time it is called.
func (q *MySQLJobs) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	for try := 0; ; try++ {
		err := q.tx(ctx, f)
		var me *gomysql.MySQLError
		if try < deadlockRetries && errors.As(err, &me) && me.Number == erDeadlock {
			continue
		}
		return err
	}
}

// erDeadlock is MySQL's ER_LOCK_DEADLOCK.
const erDeadlock = 1213

func (q *MySQLJobs) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := q.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Enqueue implements Jobs.Enqueue: one INSERT per job, in one
// transaction, as a multi-row INSERT's ids need not be consecutive.
func (q *MySQLJobs) Enqueue(ctx context.Context, payloads ...[]byte) ([]int64, error) {
	if err := checkPayloads(payloads); err != nil {
		return nil, err
	}
	ids := make([]int64, 0, len(payloads))
	err := q.inTx(ctx, func(tx *sql.Tx) error {
		ids = ids[:0]
		for _, p := range payloads {
			if p == nil {
				p = []byte{}
			}
			res, err := tx.ExecContext(ctx, mysqlEnqueueSQL, q.queue, p)
			if err != nil {
				return err
			}
			id, err := res.LastInsertId()
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim: enqueue %d jobs: %w", len(payloads), err)
	}
	return ids, nil
}

// Claim implements Jobs.Claim.
func (q *MySQLJobs) Claim(ctx context.Context, worker string, n int) ([]Job, error) {
	if err := checkClaim(worker, n); err != nil {
		return nil, err
	}
	var jobs []Job
	err := q.inTx(ctx, func(tx *sql.Tx) error {
		jobs = nil
		rows, err := tx.QueryContext(ctx, mysqlPickSQL, q.queue, n)
		if err != nil {
			return err
		}
		var now int64
		for rows.Next() {
			j := Job{Queue: q.queue, Status: StatusClaimed, Worker: worker}
			if err := rows.Scan(&j.ID, &j.Payload, &j.Attempt, &now); err != nil {
				_ = rows.Close()
				return err
			}
			j.Attempt++
			jobs = append(jobs, j)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		// The lease runs from the pick's clock reading, so that Due is
		// exactly what the row holds.
		due := now + q.cfg.lease.Microseconds()
		args := []any{worker, due}
		for _, j := range jobs {
			args = append(args, j.ID)
		}
		_, err = tx.ExecContext(ctx, `UPDATE turnstile_jobs
   SET status = 'claimed', worker = ?, attempt = attempt + 1,
       due_at = TIMESTAMPADD(MICROSECOND, ?, `+epoch+`)
 WHERE id IN (`+repeatJoin("?", len(jobs))+")", args...)
		if err != nil {
			return err
		}
		for i := range jobs {
			jobs[i].Due = time.UnixMicro(due)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim: claim %d jobs for %q: %w", n, worker, err)
	}
	sortJobs(jobs)
	return jobs, nil
}

// Heartbeat implements Jobs.Heartbeat: a transaction that locks the
// worker's claims and extends them.
func (q *MySQLJobs) Heartbeat(ctx context.Context, worker string) ([]int64, error) {
	if err := checkName("worker", worker); err != nil {
		return nil, err
	}
	var ids []int64
	err := q.inTx(ctx, func(tx *sql.Tx) error {
		ids = nil
		rows, err := tx.QueryContext(ctx, mysqlHeldSQL, q.queue, worker)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		args := []any{q.cfg.lease.Microseconds()}
		for _, id := range ids {
			args = append(args, id)
		}
		_, err = tx.ExecContext(ctx, "UPDATE turnstile_jobs SET due_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id IN ("+
			repeatJoin("?", len(ids))+")", args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: heartbeat of %q: %w", worker, err)
	}
	slices.Sort(ids)
	return ids, nil
}

// Complete implements Jobs.Complete: one statement, and one more to say
// why when it is refused.
func (q *MySQLJobs) Complete(ctx context.Context, job Job) error {
	if err := checkJob(job, q.queue); err != nil {
		return err
	}
	res, err := q.db.ExecContext(ctx, mysqlCompleteSQL, job.ID, q.queue, job.Attempt)
	if err != nil {
		return fmt.Errorf("claim: complete job %d: %w", job.ID, err)
	}
	return q.settle(ctx, res, job, StatusDone)
}

// Release implements Jobs.Release: one statement, and one more to say
// why when it is refused.
func (q *MySQLJobs) Release(ctx context.Context, job Job, delay time.Duration) error {
	if err := checkJob(job, q.queue); err != nil {
		return err
	}
	if err := checkDelay(delay); err != nil {
		return err
	}
	res, err := q.db.ExecContext(ctx, mysqlReleaseSQL, delay.Microseconds(), job.ID, q.queue, job.Attempt)
	if err != nil {
		return fmt.Errorf("claim: release job %d: %w", job.ID, err)
	}
	return q.settle(ctx, res, job, StatusReady)
}

// settle is the outcome of a Complete or Release whose UPDATE returned
// res.
func (q *MySQLJobs) settle(ctx context.Context, res sql.Result, job Job, want Status) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("claim: job %d: %w", job.ID, err)
	}
	if n == 1 {
		return nil
	}
	now, err := q.Lookup(ctx, job.ID)
	if err != nil {
		return err
	}
	return settled(job, now, want)
}

// Lookup implements Jobs.Lookup.
func (q *MySQLJobs) Lookup(ctx context.Context, id int64) (Job, error) {
	j := Job{ID: id, Queue: q.queue}
	var due sql.NullInt64
	err := q.db.QueryRowContext(ctx, mysqlJobSQL, id, q.queue).Scan(&j.Payload, &j.Status, &j.Attempt, &j.Worker, &due)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("%w: %d in queue %q", ErrUnknownJob, id, q.queue)
	}
	if err != nil {
		return Job{}, fmt.Errorf("claim: look up job %d: %w", id, err)
	}
	j.Due = fromMicros(due)
	return j, nil
}

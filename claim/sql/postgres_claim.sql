-- Claim up to $3 due jobs of queue $1 for worker $2, for $4 microseconds.
-- A job is due when it is ready and its run time has come, or when it is
-- claimed and its lease has passed: a crashed worker's jobs come back
-- here, with no reaper. SKIP LOCKED passes over the rows that concurrent
-- claims have locked, so concurrent workers take different jobs instead
-- of queueing on the same first row; a row that another claim changed
-- and committed since this statement began is checked again against the
-- WHERE before it is locked.
WITH picked AS (
    SELECT id
      FROM turnstile_jobs
     WHERE queue = $1 AND due_at <= now()
     ORDER BY due_at, id
     LIMIT $3
       FOR UPDATE SKIP LOCKED
)
UPDATE turnstile_jobs AS j
   SET status = 'claimed', worker = $2, attempt = j.attempt + 1,
       due_at = now() + $4::bigint * interval '1 microsecond'
  FROM picked
 WHERE j.id = picked.id
RETURNING j.id, j.payload, j.attempt, j.due_at

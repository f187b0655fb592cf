-- Give job $1 of queue $2 back under claim attempt $3, due again in $4
-- microseconds. The attempt stays: the next claim counts on from it.
UPDATE turnstile_jobs
   SET status = 'ready', worker = NULL, due_at = now() + $4::bigint * interval '1 microsecond'
 WHERE id = $1 AND queue = $2 AND attempt = $3 AND status = 'claimed'

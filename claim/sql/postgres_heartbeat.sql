-- Extend every claim of worker $2 on queue $1 to $3 microseconds from now.
-- A claim whose lease passed but that no other worker took yet is still
-- the worker's, and is extended too.
UPDATE turnstile_jobs
   SET due_at = now() + $3::bigint * interval '1 microsecond'
 WHERE queue = $1 AND worker = $2 AND status = 'claimed'
RETURNING id

-- Complete job $1 of queue $2 under claim attempt $3, if that claim is
-- still the job's: a later claim has a higher attempt.
UPDATE turnstile_jobs
   SET status = 'done', due_at = NULL, done_at = now()
 WHERE id = $1 AND queue = $2 AND attempt = $3 AND status = 'claimed'

-- Replace owner's claim by the result. $1 key, $2 owner, $3 result,
-- $4 retention (µs). Updates nothing if the claim was lost.
UPDATE turnstile_idempotency
SET state = 'done', result = $3, claim_expires_at = NULL,
	expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE key = $1 AND state = 'running' AND claim_owner = $2

-- Drop owner's claim so that the request can run again at once.
-- $1 key, $2 owner.
DELETE FROM turnstile_idempotency
WHERE key = $1 AND state = 'running' AND claim_owner = $2

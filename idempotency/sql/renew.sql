-- Extend owner's claim. $1 key, $2 owner, $3 claim ttl (µs). An expired
-- claim nobody has taken over is still the owner's: nobody else ran.
UPDATE turnstile_idempotency
SET claim_expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond',
	expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
WHERE key = $1 AND state = 'running' AND claim_owner = $2

-- Take over a row whose claim crashed or whose result outlived its
-- retention. $1 key, $2 owner, $3 claim ttl (µs). The row lock and the
-- re-check of the WHERE clause after it make one of several concurrent
-- takers win; the others find the row unexpired.
UPDATE turnstile_idempotency
SET state = 'running', result = NULL, claim_owner = $2,
	claim_expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond',
	expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond',
	created_at = clock_timestamp()
WHERE key = $1 AND expires_at <= clock_timestamp()

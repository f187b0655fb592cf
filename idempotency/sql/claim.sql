-- Claim a request key that no row holds. $1 key, $2 owner, $3 claim ttl (µs).
-- The primary key decides between concurrent claims: the loser's insert
-- does nothing.
INSERT INTO turnstile_idempotency (key, state, claim_owner, claim_expires_at, expires_at, created_at)
VALUES ($1, 'running', $2,
	clock_timestamp() + $3::bigint * interval '1 microsecond',
	clock_timestamp() + $3::bigint * interval '1 microsecond',
	clock_timestamp())
ON CONFLICT (key) DO NOTHING

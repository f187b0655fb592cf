-- What holds a request key after claim.sql and takeover.sql ran. $1 key.
SELECT state, result, claim_owner, expires_at <= clock_timestamp()
FROM turnstile_idempotency
WHERE key = $1

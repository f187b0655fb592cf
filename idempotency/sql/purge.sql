-- Delete up to $1 expired rows (claims of crashed runners and results past
-- their retention), in one short transaction.
DELETE FROM turnstile_idempotency
WHERE key IN (
	SELECT key FROM turnstile_idempotency
	WHERE expires_at <= clock_timestamp()
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)

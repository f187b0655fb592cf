-- Abort the caller's transaction after a stale token, so that the writes
-- it made before the check cannot commit: COMMIT then rolls back.
DO $$
BEGIN
	RAISE EXCEPTION 'turnstile: stale fencing token: transaction aborted'
		USING HINT = 'the fence guard refused this transaction''s token; roll back';
END
$$

-- Record a write's fencing token if it is fresh. One row affected: the
-- token was fresh and is now the resource's last. None: it is stale. Either
-- way the row stays locked until the transaction ends, so no other writer
-- of the resource passes its check in between.
--
-- $1 resource   $2 token   $3 accept a token equal to the last one
INSERT INTO turnstile_fences AS f (resource, token, updated_at)
VALUES ($1, $2, now())
ON CONFLICT (resource) DO UPDATE
	SET token = EXCLUDED.token, updated_at = EXCLUDED.updated_at
	WHERE f.token < EXCLUDED.token OR ($3 AND f.token = EXCLUDED.token)

-- Run as one simple-protocol query, so as one transaction: the advisory
-- transaction lock serialises clients that set up the schema at once
-- (CREATE ... IF NOT EXISTS is not safe to run concurrently).
SELECT pg_advisory_xact_lock(7379622101416928514);

-- One row per request key: a running claim or a stored result. The
-- primary key is what makes a request run once: of two inserts of one key,
-- one conflicts.
--
-- expires_at is when the row stops counting: the claim's expiry while
-- running, the end of the retention once done. Rows past it are treated as
-- absent (the next claim takes them over) and Purge deletes them.
CREATE TABLE IF NOT EXISTS turnstile_idempotency (
	key              text        PRIMARY KEY,
	state            text        NOT NULL CHECK (state IN ('running', 'done')),
	result           bytea,
	claim_owner      text,
	claim_expires_at timestamptz,
	expires_at       timestamptz NOT NULL,
	created_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX IF NOT EXISTS turnstile_idempotency_expires_at
	ON turnstile_idempotency (expires_at);

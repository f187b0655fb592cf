-- Run as one simple-protocol query, so as one transaction: the advisory
-- transaction lock serialises processes that migrate at once (concurrent
-- CREATE TABLE IF NOT EXISTS can fail on the catalog's unique indexes).
SELECT pg_advisory_xact_lock(7379622101416928514);

-- One row per fenced resource: the last fencing token a write carried.
-- Rows are never deleted: a resource's token must outlive its locks.
CREATE TABLE IF NOT EXISTS turnstile_fences (
	resource   text        PRIMARY KEY,
	token      bigint      NOT NULL CHECK (token > 0),
	updated_at timestamptz NOT NULL DEFAULT now()
);

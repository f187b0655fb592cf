-- The outbox table of package turnstile/events/outbox. Run as one
-- simple-protocol query: the statements form one transaction, and the
-- advisory lock makes concurrent migrations wait for each other.
SELECT pg_advisory_xact_lock(7234657431205431296);

CREATE TABLE IF NOT EXISTS turnstile_outbox (
	id         bigserial   PRIMARY KEY,
	event_id   text        NOT NULL UNIQUE,
	key        text        NOT NULL,
	payload    jsonb       NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	sent_at    timestamptz
);

-- The relay's scan: unsent rows in id order.
CREATE INDEX IF NOT EXISTS turnstile_outbox_unsent
	ON turnstile_outbox (id) WHERE sent_at IS NULL;

-- The relay's per-key check: an earlier unsent row of the same key.
CREATE INDEX IF NOT EXISTS turnstile_outbox_unsent_key
	ON turnstile_outbox (key, id) WHERE sent_at IS NULL;

-- Purge: sent rows by age.
CREATE INDEX IF NOT EXISTS turnstile_outbox_sent
	ON turnstile_outbox (sent_at) WHERE sent_at IS NOT NULL;

-- Rows a relay could not decode (not a valid event, or an event whose key
-- is not the row's key), moved here by the relay with the reason; the
-- later rows of their keys are published without them. Requeue moves a
-- row back, after its payload was fixed.
CREATE TABLE IF NOT EXISTS turnstile_outbox_dead (
	id         bigint      PRIMARY KEY, -- its id in turnstile_outbox
	event_id   text        NOT NULL,
	key        text        NOT NULL,
	payload    jsonb       NOT NULL,
	created_at timestamptz NOT NULL,
	dead_at    timestamptz NOT NULL DEFAULT now(),
	reason     text        NOT NULL
);

-- Wakes relays (LISTEN turnstile_outbox) when rows are added; the
-- notice is sent when the adding transaction commits, once per
-- transaction.
CREATE OR REPLACE FUNCTION turnstile_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('turnstile_outbox', '');
	RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS turnstile_outbox_notify ON turnstile_outbox;
CREATE TRIGGER turnstile_outbox_notify
	AFTER INSERT ON turnstile_outbox
	FOR EACH STATEMENT EXECUTE FUNCTION turnstile_outbox_notify();

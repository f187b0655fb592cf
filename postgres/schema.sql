-- Run as one simple-protocol query, so as one transaction: the advisory
-- transaction lock serialises clients that set up the schema at once
-- (CREATE OR REPLACE FUNCTION is not safe to run concurrently).
SELECT pg_advisory_xact_lock(7379622101416928513);

-- One row per key ever locked: the fencing counter must outlive releases.
-- owner is '' and expires_at -infinity while the key is free.
CREATE TABLE IF NOT EXISTS turnstile_locks (
	key        text        PRIMARY KEY,
	owner      text        NOT NULL,
	token      bigint      NOT NULL,
	expires_at timestamptz NOT NULL
);

-- Listing the locks under a key prefix reads a range of keys in byte
-- order, which the primary key's index serves only in a database whose
-- collation is C. Created once: CREATE INDEX IF NOT EXISTS would lock the
-- table against writes on every Dial before finding the index there.
DO $$
BEGIN
	IF to_regclass('turnstile_locks_key_c') IS NULL THEN
		CREATE INDEX turnstile_locks_key_c ON turnstile_locks (key COLLATE "C");
	END IF;
END $$;

-- turnstile_acquire takes key for owner: the session-scoped advisory lock
-- on hash (unless this session already holds it for key, have) and the
-- row, if the row is free, expired or already owner's. It returns the new
-- token, or NULL (and no advisory lock) if someone else holds key.
CREATE OR REPLACE FUNCTION turnstile_acquire(k text, hash bigint, o text, ttl_ms bigint, have boolean)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	tok bigint;
	-- Tokens are a hybrid logical clock, max(last + 1, server time in µs),
	-- so that they stay comparable with the tokens of other stores (the
	-- fallback composite switches between stores).
	now_us bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
BEGIN
	IF NOT have AND NOT pg_try_advisory_lock(hash) THEN
		RETURN NULL;
	END IF;
	INSERT INTO turnstile_locks AS t (key, owner, token, expires_at)
	VALUES (k, o, now_us, clock_timestamp() + ttl_ms * interval '1 millisecond')
	ON CONFLICT (key) DO UPDATE
		SET owner = excluded.owner, token = greatest(t.token + 1, now_us), expires_at = excluded.expires_at
		WHERE t.owner = excluded.owner OR t.expires_at <= clock_timestamp()
	RETURNING t.token INTO tok;
	IF tok IS NULL AND NOT have THEN
		PERFORM pg_advisory_unlock(hash);
	END IF;
	RETURN tok;
END $$;

-- turnstile_release frees key if owner holds it, and drops the advisory
-- lock when unlock is set. It returns whether owner held key, and then
-- tells waiters on channel turnstile_released (payload: the key) when the
-- transaction commits.
CREATE OR REPLACE FUNCTION turnstile_release(k text, hash bigint, o text, unlock boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	held boolean;
BEGIN
	UPDATE turnstile_locks SET owner = '', expires_at = '-infinity'
	WHERE key = k AND owner = o AND expires_at > clock_timestamp();
	held := FOUND;
	IF held THEN
		PERFORM pg_notify('turnstile_released', k);
	END IF;
	IF unlock THEN
		PERFORM pg_advisory_unlock(hash);
	END IF;
	RETURN held;
END $$;

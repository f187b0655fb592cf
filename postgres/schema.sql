-- Run as one simple-protocol query, so as one transaction: the advisory
-- transaction lock serialises clients that set up the schema at once
-- (CREATE OR REPLACE FUNCTION is not safe to run concurrently).
SELECT pg_advisory_xact_lock(7379622101416928513);

-- One row per key ever locked: the fencing counter must outlive releases.
-- owner is '' and expires_at -infinity while the key is free. The row of
-- the empty key, which no lock has, holds the tenant's salt in token
-- (tenant.go).
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

-- lock_id is the advisory lock id the key was last taken under (NULL in
-- rows written before it existed, or only by the lock kinds): a refused
-- acquisition looks up which other key holds its id. Added once, as the
-- index is.
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'turnstile_locks'::regclass AND attname = 'lock_id' AND NOT attisdropped) THEN
		ALTER TABLE turnstile_locks ADD COLUMN lock_id bigint;
	END IF;
	IF to_regclass('turnstile_locks_lock_id') IS NULL THEN
		CREATE INDEX turnstile_locks_lock_id ON turnstile_locks (lock_id);
	END IF;
END $$;

-- turnstile_lock_acquire takes key k for owner o: the session-scoped
-- advisory lock id (unless this session already holds it for k, have)
-- and the row, if the row is free, expired or already o's. It returns the
-- new token, or NULL (and no advisory lock) if someone else holds k.
-- When the advisory lock is taken while k's own lease is not live, and
-- another key's live lease was taken under the same id, other names that
-- key: the two keys' ids collide.
CREATE OR REPLACE FUNCTION turnstile_lock_acquire(k text, id bigint, o text, ttl_ms bigint, have boolean, OUT tok bigint, OUT other text)
LANGUAGE plpgsql AS $$
DECLARE
	-- Tokens are a hybrid logical clock, max(last + 1, server time in µs),
	-- so that they stay comparable with the tokens of other stores (the
	-- fallback composite switches between stores).
	now_us bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
BEGIN
	IF NOT have AND NOT pg_try_advisory_lock(id) THEN
		IF NOT EXISTS (SELECT 1 FROM turnstile_locks t
				WHERE t.key = k AND t.owner <> '' AND t.expires_at > clock_timestamp()) THEN
			SELECT t.key INTO other FROM turnstile_locks t
			WHERE t.lock_id = id AND t.key <> k AND t.owner <> '' AND t.expires_at > clock_timestamp()
			LIMIT 1;
		END IF;
		RETURN;
	END IF;
	INSERT INTO turnstile_locks AS t (key, owner, token, expires_at, lock_id)
	VALUES (k, o, now_us, clock_timestamp() + ttl_ms * interval '1 millisecond', id)
	ON CONFLICT (key) DO UPDATE
		SET owner = excluded.owner, token = greatest(t.token + 1, now_us), expires_at = excluded.expires_at, lock_id = excluded.lock_id
		WHERE t.owner = excluded.owner OR t.expires_at <= clock_timestamp()
	RETURNING t.token INTO tok;
	IF tok IS NULL AND NOT have THEN
		PERFORM pg_advisory_unlock(id);
	END IF;
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


-- The lock kinds beside the plain lock: reentrant locks, semaphores and
-- read-write locks. One row per holder (kind 'reentrant', 'semaphore',
-- 'read' or 'write') and per waiting writer's claim (kind 'claim'); a
-- holder's row goes when it releases or, on acquisition of its key, once
-- it has expired. Tokens come from the key's row in turnstile_locks, the
-- plain lock's fence, so they increase across every kind of a key; taking
-- that row's lock also serialises the acquisitions of the key.
CREATE TABLE IF NOT EXISTS turnstile_holds (
	key        text        NOT NULL,
	kind       text        NOT NULL,
	owner      text        NOT NULL,
	count      integer     NOT NULL, -- a reentrant holder's acquisitions
	permits    integer     NOT NULL, -- a semaphore's number of permits
	token      bigint      NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (key, kind, owner)
);

-- turnstile_hold_acquire takes key k of kind kd for owner o. It returns
-- the lease's token, or NULL when k is taken; for a semaphore whose
-- permits are held with a number other than n it returns NULL and that
-- number (stored). A writer refused leaves a claim that keeps new readers
-- out for claim_ms.
CREATE OR REPLACE FUNCTION turnstile_hold_acquire(k text, kd text, o text, ttl_ms bigint, n integer, claim_ms bigint, OUT tok bigint, OUT stored integer)
LANGUAGE plpgsql AS $$
DECLARE
	now_us bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
	exp timestamptz := clock_timestamp() + ttl_ms * interval '1 millisecond';
	h turnstile_holds%ROWTYPE;
	others integer;
BEGIN
	INSERT INTO turnstile_locks (key, owner, token, expires_at)
	VALUES (k, '', 0, '-infinity') ON CONFLICT (key) DO NOTHING;
	PERFORM 1 FROM turnstile_locks WHERE key = k FOR UPDATE;
	DELETE FROM turnstile_holds WHERE key = k AND expires_at <= clock_timestamp();
	IF kd = 'reentrant' THEN
		SELECT * INTO h FROM turnstile_holds WHERE key = k AND kind = kd;
		IF FOUND THEN
			IF h.owner <> o THEN
				RETURN;
			END IF;
			UPDATE turnstile_holds SET count = count + 1, expires_at = greatest(expires_at, exp)
			WHERE key = k AND kind = kd AND owner = o;
			tok := h.token;
			RETURN;
		END IF;
	ELSIF kd = 'semaphore' THEN
		SELECT min(permits), count(*) FILTER (WHERE owner <> o) INTO stored, others
		FROM turnstile_holds WHERE key = k AND kind = kd;
		IF stored IS NOT NULL AND stored <> n THEN
			RETURN;
		END IF;
		stored := NULL;
		IF others >= n THEN
			RETURN;
		END IF;
	ELSIF kd = 'read' THEN
		IF NOT EXISTS (SELECT 1 FROM turnstile_holds WHERE key = k AND kind = kd AND owner = o)
			AND EXISTS (SELECT 1 FROM turnstile_holds WHERE key = k AND kind IN ('write', 'claim')) THEN
			RETURN;
		END IF;
	ELSIF kd = 'write' THEN
		IF EXISTS (SELECT 1 FROM turnstile_holds WHERE key = k AND (kind = 'read' OR kind = 'write' AND owner <> o)) THEN
			INSERT INTO turnstile_holds (key, kind, owner, count, permits, token, expires_at)
			VALUES (k, 'claim', o, 0, 0, 0, clock_timestamp() + claim_ms * interval '1 millisecond')
			ON CONFLICT (key, kind, owner) DO UPDATE SET expires_at = excluded.expires_at;
			RETURN;
		END IF;
		DELETE FROM turnstile_holds WHERE key = k AND kind = 'claim' AND owner = o;
	ELSE
		RAISE EXCEPTION 'turnstile: no lock kind %', kd;
	END IF;
	UPDATE turnstile_locks SET token = greatest(token + 1, now_us) WHERE key = k RETURNING token INTO tok;
	INSERT INTO turnstile_holds (key, kind, owner, count, permits, token, expires_at)
	VALUES (k, kd, o, 1, n, tok, exp)
	ON CONFLICT (key, kind, owner) DO UPDATE
		SET count = 1, permits = excluded.permits, token = excluded.token, expires_at = excluded.expires_at;
END $$;

-- turnstile_hold_release takes back one acquisition of o's hold of kind kd
-- on k (a reentrant holder's count goes down by one, and its hold goes
-- with the last). It returns whether o held k, and tells waiters on
-- channel turnstile_released when a hold went.
CREATE OR REPLACE FUNCTION turnstile_hold_release(k text, kd text, o text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	UPDATE turnstile_holds SET count = count - 1
	WHERE key = k AND kind = kd AND owner = o AND count > 1 AND expires_at > clock_timestamp();
	IF FOUND THEN
		RETURN true;
	END IF;
	DELETE FROM turnstile_holds WHERE key = k AND kind = kd AND owner = o AND expires_at > clock_timestamp();
	IF FOUND THEN
		PERFORM pg_notify('turnstile_released', k);
		RETURN true;
	END IF;
	RETURN false;
END $$;

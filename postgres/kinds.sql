
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

-- turnstile_hold_refused tells whether the live holders of key k keep
-- owner o out of kind kd: refused, or stored, the number of a semaphore's
-- permits when they are held with one other than n. An owner's own hold
-- does not refuse it (a re-entry, or a retry whose reply was lost).
CREATE OR REPLACE FUNCTION turnstile_hold_refused(k text, kd text, o text, n integer, OUT refused boolean, OUT stored integer)
LANGUAGE plpgsql AS $$
DECLARE
	others integer;
BEGIN
	refused := false;
	IF kd = 'reentrant' THEN
		refused := EXISTS (SELECT 1 FROM turnstile_holds
			WHERE key = k AND kind = kd AND owner <> o AND expires_at > clock_timestamp());
	ELSIF kd = 'semaphore' THEN
		SELECT min(permits), count(*) FILTER (WHERE owner <> o) INTO stored, others
		FROM turnstile_holds WHERE key = k AND kind = kd AND expires_at > clock_timestamp();
		IF stored = n THEN
			stored := NULL;
		END IF;
		refused := stored IS NOT NULL OR others >= n;
	ELSIF kd = 'read' THEN
		refused := NOT EXISTS (SELECT 1 FROM turnstile_holds
				WHERE key = k AND kind = kd AND owner = o AND expires_at > clock_timestamp())
			AND EXISTS (SELECT 1 FROM turnstile_holds
				WHERE key = k AND kind IN ('write', 'claim') AND expires_at > clock_timestamp());
	ELSIF kd = 'write' THEN
		refused := EXISTS (SELECT 1 FROM turnstile_holds
			WHERE key = k AND (kind = 'read' OR kind = 'write' AND owner <> o) AND expires_at > clock_timestamp());
	ELSE
		RAISE EXCEPTION 'turnstile: no lock kind %', kd;
	END IF;
END $$;

-- turnstile_hold_acquire takes key k of kind kd for owner o. It returns
-- the lease's token, or NULL when k is taken; for a semaphore whose
-- permits are held with a number other than n it returns NULL and that
-- number (stored). A writer refused leaves a claim that keeps new readers
-- out for claim_ms. The holders are looked at first without a lock, so
-- that waiters polling a taken key do not queue on its fence row ahead of
-- the holders' own calls; only an acquisition that may succeed locks the
-- row and looks again.
CREATE OR REPLACE FUNCTION turnstile_hold_acquire(k text, kd text, o text, ttl_ms bigint, n integer, claim_ms bigint, OUT tok bigint, OUT stored integer)
LANGUAGE plpgsql AS $$
DECLARE
	now_us bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
	exp timestamptz := clock_timestamp() + ttl_ms * interval '1 millisecond';
	refused boolean;
BEGIN
	SELECT r.refused, r.stored INTO refused, stored FROM turnstile_hold_refused(k, kd, o, n) r;
	IF NOT refused THEN
		INSERT INTO turnstile_locks (key, owner, token, expires_at)
		VALUES (k, '', 0, '-infinity') ON CONFLICT (key) DO NOTHING;
		PERFORM 1 FROM turnstile_locks WHERE key = k FOR UPDATE;
		SELECT r.refused, r.stored INTO refused, stored FROM turnstile_hold_refused(k, kd, o, n) r;
	END IF;
	IF refused THEN
		IF kd = 'write' THEN
			INSERT INTO turnstile_holds (key, kind, owner, count, permits, token, expires_at)
			VALUES (k, 'claim', o, 0, 0, 0, clock_timestamp() + claim_ms * interval '1 millisecond')
			ON CONFLICT (key, kind, owner) DO UPDATE SET expires_at = excluded.expires_at;
		END IF;
		RETURN;
	END IF;
	DELETE FROM turnstile_holds WHERE key = k AND expires_at <= clock_timestamp();
	IF kd = 'reentrant' THEN
		UPDATE turnstile_holds SET count = count + 1, expires_at = greatest(expires_at, exp)
		WHERE key = k AND kind = kd AND owner = o
		RETURNING token INTO tok;
		IF FOUND THEN
			RETURN;
		END IF;
	ELSIF kd = 'write' THEN
		DELETE FROM turnstile_holds WHERE key = k AND kind = 'claim' AND owner = o;
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

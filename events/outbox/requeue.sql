-- Moves dead-lettered row $1 back to the outbox as a new row (so after
-- every row its key has now), if its payload is still $2, the one that
-- was checked. An event id already back in the outbox is not added
-- twice. Returns the row's new id, or none if the event was in the
-- outbox already; no row at all if the dead row is gone or changed.
WITH dead AS (
	DELETE FROM turnstile_outbox_dead
	WHERE id = $1 AND payload = $2::jsonb
	RETURNING event_id, key, payload
), added AS (
	INSERT INTO turnstile_outbox (event_id, key, payload)
	SELECT event_id, key, payload FROM dead
	ON CONFLICT (event_id) DO NOTHING
	RETURNING id
)
SELECT (SELECT count(*) FROM dead), (SELECT id FROM added)

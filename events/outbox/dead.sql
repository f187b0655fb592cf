-- Moves undecodable rows to the dead-letter table, in the claiming
-- transaction. $1 their ids, $2 why each could not be decoded (same
-- order). The claim holds the head row of each of their keys, so no
-- other relay is sending rows of those keys meanwhile.
WITH dead AS (
	DELETE FROM turnstile_outbox
	WHERE id = ANY($1::bigint[]) AND sent_at IS NULL
	RETURNING id, event_id, key, payload, created_at
)
INSERT INTO turnstile_outbox_dead (id, event_id, key, payload, created_at, reason)
SELECT d.id, d.event_id, d.key, d.payload, d.created_at, r.reason
FROM dead d
JOIN unnest($1::bigint[], $2::text[]) AS r(id, reason) ON r.id = d.id

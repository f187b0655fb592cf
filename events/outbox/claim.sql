-- Claims a batch: the oldest $1 rows that are the head of their key (no
-- earlier unsent row of the same key) and that no other relay holds
-- (row locks, SKIP LOCKED, kept until the transaction ends), and returns
-- them with the unsent rows that follow them in their keys, oldest
-- first, at most $1 rows in all.
--
-- While a relay holds the head of a key, no other relay can claim any row
-- of that key: the later rows are not heads. So one key's rows are
-- published in id order even with several relays, and a held head never
-- fills another relay's batch with rows it must not send.
WITH heads AS (
	SELECT o.key
	FROM turnstile_outbox o
	WHERE o.sent_at IS NULL
	  AND NOT EXISTS (
		SELECT 1
		FROM turnstile_outbox p
		WHERE p.key = o.key
		  AND p.sent_at IS NULL
		  AND p.id < o.id
	  )
	ORDER BY o.id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)
SELECT id, key, payload
FROM turnstile_outbox
WHERE sent_at IS NULL
  AND key IN (SELECT key FROM heads)
ORDER BY id
LIMIT $1

-- $1 the ids of rows the publisher acknowledged.
UPDATE turnstile_outbox SET sent_at = now() WHERE id = ANY($1)

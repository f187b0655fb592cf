-- $1 the id of a dead-lettered row: its key and payload.
SELECT key, payload FROM turnstile_outbox_dead WHERE id = $1

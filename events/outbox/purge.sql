-- $1 rows sent before this time are deleted.
DELETE FROM turnstile_outbox WHERE sent_at < $1

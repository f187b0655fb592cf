SELECT count(*) FROM turnstile_outbox WHERE sent_at IS NULL

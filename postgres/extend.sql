UPDATE turnstile_locks
SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
WHERE key = $1 AND owner = $2 AND expires_at > clock_timestamp()

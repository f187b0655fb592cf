-- Moves the lease's expiry if owner still holds it; 0 rows affected if not.
UPDATE turnstile_locks
SET expires_at = NOW(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND owner = ? AND expires_at > NOW(6)

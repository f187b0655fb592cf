-- Extend for many locks of one connection in one round trip. The batch
-- fills in {{cases}} with "WHEN ? THEN ?" (name, TTL in microseconds) per
-- lock and {{pairs}} with "(?, ?)" (name, owner) per lock.
UPDATE turnstile_locks
SET expires_at = NOW(6) + INTERVAL (CASE name {{cases}} END) MICROSECOND
WHERE (name, owner) IN ({{pairs}}) AND expires_at > NOW(6)

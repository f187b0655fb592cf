-- Ends owner's lease at once, keeping the row for its token, and frees the
-- session's user lock (the first ?, its name) in the same round trip:
-- RELEASE_LOCK runs while the row is updated, and a session that takes
-- the user lock right after waits for this row's commit before it can
-- take the lease. 0 rows affected if owner did not hold a live lease;
-- then the user lock is still held and the caller frees it with
-- release_lock.sql.
UPDATE turnstile_locks
SET owner = IF(RELEASE_LOCK(?) IS NULL, '', ''), expires_at = NOW(6)
WHERE name = ? AND owner = ? AND expires_at > NOW(6)

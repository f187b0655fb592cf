-- acquire.sql for a name this session does not hold: GET_LOCK of the user
-- lock (the last ?, its name) first, in the same round trip. When another
-- session holds the user lock nothing is inserted (0 rows affected); when the user lock was taken but another
-- owner's lease is still live the row is left alone (0 rows affected too),
-- and the caller frees the user lock with release_lock.sql, which is
-- harmless if this session never got it.
INSERT INTO turnstile_locks (name, token, owner, expires_at)
SELECT ?, LAST_INSERT_ID(CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED)), ?, NOW(6) + INTERVAL ? MICROSECOND
FROM DUAL
WHERE GET_LOCK(?, 0) = 1
ON DUPLICATE KEY UPDATE
    token      = IF(owner = VALUES(owner) OR owner = '' OR expires_at <= NOW(6), LAST_INSERT_ID(GREATEST(token + 1, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED))), token),
    owner      = IF(owner = VALUES(owner) OR owner = '' OR expires_at <= NOW(6), VALUES(owner), owner),
    expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)

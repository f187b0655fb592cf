-- Takes the lease on name for owner when it is free (released: no owner,
-- whatever the row's expiry says, since a server clock stepped back can
-- put a release's time in the future), expired, or already owner's (a
-- retry), with the next token; leaves the row untouched (0 rows
-- affected) when another owner's lease is still live. Assignments run left
-- to right: token and owner test the old row, expires_at tests whether
-- owner changed hands. The new token comes back as the insert id.
INSERT INTO turnstile_locks (name, token, owner, expires_at)
VALUES (?, LAST_INSERT_ID(CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED)), ?, NOW(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
    token      = IF(owner = VALUES(owner) OR owner = '' OR expires_at <= NOW(6), LAST_INSERT_ID(GREATEST(token + 1, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED))), token),
    owner      = IF(owner = VALUES(owner) OR owner = '' OR expires_at <= NOW(6), VALUES(owner), owner),
    expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)

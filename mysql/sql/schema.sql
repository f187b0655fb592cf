-- One row per lock name: the lease that outlives a dead session until its
-- TTL, and the counter behind the fencing tokens. Rows are never deleted,
-- so a token is never issued twice for a name.
CREATE TABLE IF NOT EXISTS turnstile_locks (
    name       VARBINARY(255)  NOT NULL PRIMARY KEY,
    token      BIGINT UNSIGNED NOT NULL,
    owner      VARBINARY(255)  NOT NULL,
    expires_at DATETIME(6)     NOT NULL
) ENGINE = InnoDB

-- The holders of the lock kinds beside the plain lock: one row per holder
-- of a reentrant lock, a semaphore's permit, a read or write lock, and per
-- waiting writer's claim. A row goes when its holder releases or, on the
-- next acquisition of its name, once it has expired. Tokens come from the
-- name's row in turnstile_locks, the plain lock's fence.
CREATE TABLE IF NOT EXISTS turnstile_holds (
    name       VARBINARY(255)  NOT NULL,
    kind       VARBINARY(16)   NOT NULL,
    owner      VARBINARY(255)  NOT NULL,
    depth      INT UNSIGNED    NOT NULL,
    permits    INT UNSIGNED    NOT NULL,
    token      BIGINT UNSIGNED NOT NULL,
    expires_at DATETIME(6)     NOT NULL,
    PRIMARY KEY (name, kind, owner)
) ENGINE = InnoDB

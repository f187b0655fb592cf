-- One row per job. due_at is when the job may be claimed next (UTC): its
-- run time while ready, the end of its lease while claimed, NULL once
-- done. attempt counts the claims; each claim's attempt is its fencing
-- token.
CREATE TABLE IF NOT EXISTS turnstile_jobs (
    id          BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue       VARBINARY(255) NOT NULL,
    payload     LONGBLOB       NOT NULL,
    status      VARCHAR(8)     NOT NULL,
    due_at      DATETIME(6)    NULL,
    attempt     BIGINT         NOT NULL DEFAULT 0,
    worker      VARBINARY(255) NULL,
    enqueued_at DATETIME(6)    NOT NULL,
    done_at     DATETIME(6)    NULL,
    KEY turnstile_jobs_due (queue, due_at),
    KEY turnstile_jobs_worker (queue, worker)
) ENGINE = InnoDB

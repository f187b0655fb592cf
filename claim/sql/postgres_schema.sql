-- Sent as one simple-protocol query, so it runs as one transaction: the
-- advisory lock (two-key form, apart from turnstile's lock ids) makes
-- concurrent migrations wait for each other instead of both creating the
-- tables and one failing on the catalog.
SELECT pg_advisory_xact_lock(hashtext('turnstile'), hashtext('turnstile_claim'));

-- One row per coupon. The CHECK keeps used, used_by and used_at in step,
-- whatever writes to the table.
CREATE TABLE IF NOT EXISTS turnstile_coupons (
    code      text        PRIMARY KEY,
    used      boolean     NOT NULL DEFAULT false,
    used_by   text,
    used_at   timestamptz,
    issued_at timestamptz NOT NULL DEFAULT now(),
    CHECK (used = (used_by IS NOT NULL) AND used = (used_at IS NOT NULL))
);

-- One row per job. due_at is when the job may be claimed next: its run
-- time while ready, the end of its lease while claimed, NULL once done.
-- attempt counts the claims; each claim's attempt is its fencing token.
-- worker is the claim's worker while claimed, who completed it once done.
CREATE TABLE IF NOT EXISTS turnstile_jobs (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text        NOT NULL,
    payload     bytea       NOT NULL,
    status      text        NOT NULL DEFAULT 'ready' CHECK (status IN ('ready', 'claimed', 'done')),
    due_at      timestamptz,
    attempt     bigint      NOT NULL DEFAULT 0,
    worker      text,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    done_at     timestamptz,
    CHECK ((status = 'done') = (due_at IS NULL))
);
CREATE INDEX IF NOT EXISTS turnstile_jobs_due ON turnstile_jobs (queue, due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS turnstile_jobs_worker ON turnstile_jobs (queue, worker) WHERE status = 'claimed';

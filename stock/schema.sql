-- Sent as one simple-protocol query, so it runs as one transaction: the
-- advisory lock (two-key form, apart from turnstile's lock ids) makes
-- concurrent migrations wait for each other instead of both creating the
-- table and one failing on the catalog.
SELECT pg_advisory_xact_lock(hashtext('turnstile'), hashtext('turnstile_stock'));

-- One row per item on sale. The CHECK makes the database itself refuse a
-- negative stock, whatever writes to it; version changes on every write
-- and is what a compare-and-set compares.
CREATE TABLE IF NOT EXISTS turnstile_stock (
    id       text   PRIMARY KEY,
    quantity bigint NOT NULL CHECK (quantity >= 0),
    version  bigint NOT NULL
);

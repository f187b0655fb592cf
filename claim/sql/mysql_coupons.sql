-- One row per coupon. Codes and names are bytes, compared exactly.
CREATE TABLE IF NOT EXISTS turnstile_coupons (
    code      VARBINARY(255) NOT NULL PRIMARY KEY,
    used      BOOLEAN        NOT NULL DEFAULT FALSE,
    used_by   VARBINARY(255) NULL,
    used_at   DATETIME(6)    NULL,
    issued_at DATETIME(6)    NOT NULL
) ENGINE = InnoDB

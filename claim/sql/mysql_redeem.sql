-- The redemption itself: one row, updated only while unused. Of
-- concurrent redeemers the first takes the row lock; the others wait for
-- its commit, read the row's latest version, find it used and update
-- nothing. Times are UTC, whatever the session's time zone.
UPDATE turnstile_coupons
   SET used = TRUE, used_by = ?, used_at = UTC_TIMESTAMP(6)
 WHERE code = ? AND NOT used

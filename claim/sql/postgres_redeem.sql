-- The redemption itself: one row, updated only while unused. Of
-- concurrent redeemers the first takes the row lock; the others wait for
-- its commit, find used = true and update nothing.
UPDATE turnstile_coupons
   SET used = true, used_by = $2, used_at = now()
 WHERE code = $1 AND NOT used
RETURNING used_at

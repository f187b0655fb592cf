-- Compare-and-set: takes $3 units from row $1 only if its version is still
-- $2, the one the caller read its quantity at. No row: another write came
-- first, and the caller reads again.
UPDATE turnstile_stock
   SET quantity = quantity - $3, version = version + 1
 WHERE id = $1 AND version = $2
RETURNING quantity

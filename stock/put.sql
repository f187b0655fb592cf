-- Gives $2 units back to row $1 (creating it if needed) in one atomic
-- update: an increment cannot oversell, so it needs no compare-and-set.
INSERT INTO turnstile_stock (id, quantity, version)
VALUES ($1, $2, 1)
ON CONFLICT (id) DO UPDATE
   SET quantity = turnstile_stock.quantity + EXCLUDED.quantity, version = turnstile_stock.version + 1
RETURNING quantity

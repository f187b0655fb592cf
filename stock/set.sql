-- Stores $2 units for row $1, creating it if needed. Bumping the version
-- makes every compare-and-set that read the old level fail and read again.
INSERT INTO turnstile_stock (id, quantity, version)
VALUES ($1, $2, 1)
ON CONFLICT (id) DO UPDATE
   SET quantity = EXCLUDED.quantity, version = turnstile_stock.version + 1

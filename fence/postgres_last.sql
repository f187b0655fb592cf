-- The last fencing token accepted for resource $1 (no row: none yet).
SELECT token FROM turnstile_fences WHERE resource = $1

UPDATE turnstile_locks AS t
SET expires_at = clock_timestamp() + r.ttl_ms * interval '1 millisecond'
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS r(key, owner, ttl_ms)
WHERE t.key = r.key AND t.owner = r.owner AND t.expires_at > clock_timestamp()
RETURNING t.key

-- $1 event id, $2 lock key, $3 the event's JSON. An event id already in
-- the table is left as it is: adding an event twice sends it once.
INSERT INTO turnstile_outbox (event_id, key, payload)
VALUES ($1, $2, $3)
ON CONFLICT (event_id) DO NOTHING

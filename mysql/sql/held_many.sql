-- Which of the (name, owner) pairs in {{pairs}} hold a live lease: asked
-- when extend_many.sql updated fewer rows than it was given.
SELECT name, owner FROM turnstile_locks
WHERE (name, owner) IN ({{pairs}}) AND expires_at > NOW(6)

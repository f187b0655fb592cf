-- Issue a batch of codes; codes already there (used or not) are kept.
INSERT INTO turnstile_coupons (code)
SELECT code FROM unnest($1::text[]) AS code
ON CONFLICT (code) DO NOTHING

// Package idempotency runs a request once per request id: the first call
// with a key runs the work and stores its result; a duplicate that
// arrives while it runs is told so (ErrInProgress) or waits for it
// (WithWait); a duplicate that arrives later gets the stored result
// without running the work again.
//
//	store, err := idempotency.NewRedis(rueidisClient)   // or NewPostgres(pool), NewMemory()
//	receipt, replayed, err := store.Do(ctx, "payment:"+requestID, func(ctx context.Context) ([]byte, error) {
//		return charge(ctx, order)
//	})
//	switch {
//	case errors.Is(err, idempotency.ErrInProgress): // the first attempt is still charging: answer 409, retry later
//	case err != nil: // charge failed (nothing stored, a retry charges again) or the store failed
//	}
//
// This is the answer to a client that retries after a timeout: the retry
// carries the same request id, so the charge runs once and the retry gets
// the first charge's receipt. An idempotency key makes one request safe
// to repeat; a lock (package turnstile) serialises different requests on
// one resource. Payments need both.
//
// # How a key is claimed
//
// The first call claims the key with one atomic step on the store — SET NX
// PX on Redis, an INSERT guarded by the primary key on PostgreSQL — and
// runs fn while one goroutine renews the claim every third of the claim
// TTL (WithClaimTTL, default 30 s). On success the claim is replaced by
// fn's result, kept for the retention (WithRetention, default 24 h). On
// error the claim is dropped at once and nothing is stored: the key is
// retryable, and fn's error is returned as it is.
//
// # Crashes, pauses and partitions
//
// A runner that crashes stops renewing, and its claim expires after at
// most the claim TTL; the next call then runs fn again. fn thus runs once
// per key while its runner keeps the claim, and again only after a runner
// crashed, or lost its claim, in the middle of fn — whose effects may be
// half done. Work that must never repeat (a charge) should also be
// idempotent at its own end — pass the request key to the payment
// provider — or be fenced with a lock's token (package fence).
//
// A runner cut off from the store, or paused longer than the claim TTL,
// may find its claim taken over when it comes back. It never overwrites
// the new claim or result: storing is owner-checked, and Do returns
// ErrClaimLost with fn's result. The context given to fn is cancelled
// with cause ErrClaimLost as soon as a renewal is refused, or no renewal
// has been confirmed for a whole claim TTL, so fn can stop early.
//
// If storing the result fails (the store is unreachable when fn
// returns), Do returns fn's result with the store's error; the claim then
// expires after the claim TTL and a later duplicate runs fn again.
//
// Expiry is measured by the store's clock (Redis key expiry, PostgreSQL
// clock_timestamp()); the client's clock only paces renewals.
package idempotency

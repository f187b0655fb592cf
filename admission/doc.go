// Package admission limits how often a key may be acquired, in front of
// the lock: one hot resource offered 100,000 requests a second
// is served at, say, 1,000 acquisitions a second, and the rest wait in line
// or are refused. Both admissions here implement turnstile.Admission; give
// one to a Client with turnstile.WithAdmission, choosing
// turnstile.RejectOverLimit (fail at once with turnstile.ErrRateLimited)
// or turnstile.QueueOverLimit (wait in a first-come-first-served line per
// Client and key, then be admitted):
//
//	a, err := admission.NewRedis(client, admission.Limit{Rate: 1000, Burst: 20})
//	c, err := turnstile.New(backend, turnstile.WithAdmission(a, turnstile.RejectOverLimit))
//
// # Redis: one limit shared by every process
//
// NewRedis keeps each key's limit in Redis under prefix + "{K}:admission",
// in the hash slot of the lock's own keys. Each Admit runs one short
// script implementing the generic cell rate algorithm (GCRA): the key
// holds the theoretical arrival time (TAT) of the next request at the
// limit's rate; a request is admitted if the TAT, advanced by one emission
// interval (1/Rate), is no more than Burst intervals ahead of the server's
// clock, and then the advanced TAT is stored. A refused request changes
// nothing and learns how long until it would be admitted. The script reads
// the time with the server's TIME command, so the clocks of the processes
// do not matter, and it gives the key an expiry at its TAT: a key nobody
// asks for disappears within Burst/Rate, and Redis holds one small string
// per key in use.
//
// Guarantee: over any period of length d, Redis admits at most
// Burst + d×Rate requests per key, counted on the server's clock, whatever
// the number of processes.
//
// Limits, said plainly:
//   - If Redis cannot be asked (down, timeout, cancelled context), Admit
//     returns the error and the acquisition fails with it; whether the
//     request counted against the limit is then unknown.
//   - The script reads the server's clock with TIME before it writes,
//     which needs Redis 5.0 or later.
//   - The limit is as good as the server's record and clock. A failover
//     to a replica that missed the last writes, or an eviction under
//     maxmemory, forgets up to Burst/Rate of history: the key may admit up
//     to Burst more at once. A server clock set back by s refuses the key
//     for up to s longer; one set forward admits up to Burst at once.
//
// # The pre-filter
//
// Each Redis admission also keeps a golang.org/x/time/rate token bucket
// per key in the process, with the same Rate and Burst, and consults it
// before Redis. It counts the requests this process sent to Redis for the
// key, admitted or not, so a process never sends Redis more than
// Burst + d×Rate of them in any period d, and a request it refuses costs
// no round trip.
//
// It refuses only when this process alone is offering more than the
// limit: a process that asks within the limit always reaches Redis and
// gets Redis's answer, and the requests it refuses are ones the shared
// limit could not all have admitted, since Redis counts this process's
// requests too. It does not pick the same ones, though: because it also
// counts the requests Redis refused while other processes used the room,
// it may refuse a request at an instant when Redis would have admitted it;
// each such refusal by Redis holds this process back by at most 1/Rate.
// The key's admissions stay at the limit as long as the processes
// together offer at least the limit (three instances offering 5,000 a
// second under a 1,000 a second limit are admitted 999 a second in the
// tests). WithoutPreFilter switches the pre-filter off: then every Admit
// is a round trip.
//
// # Local: a limit per process
//
// NewLocal is the same bucket on its own: a limit per process, with no
// round trip, for one instance or where each instance may use the full
// limit.
//
// Both keep at most WithMaxKeys keys in the process (default
// DefaultMaxKeys) and forget the least recently asked key past that; see
// Local for what forgetting costs.
//
// # Errors
//
// A Limit outside its bounds (Rate not in (0, MaxRate], Burst below 1, a
// burst that takes longer than MaxWindow to refill), a nil client or
// option, and a bad option value match turnstile.ErrInvalidOption; an
// empty or over-long key matches turnstile.ErrInvalidKey; a nil context
// matches turnstile.ErrInvalidOption. Each is returned before any round
// trip. A cancelled context gives an error that matches the context's
// error.
package admission

// Package service is the turnstile lock service, "turnstile serve": the
// API of proto/turnstile/v1 over any store turnstile opens, served with
// Connect, so that one set of handlers speaks gRPC, gRPC-Web and
// Connect's JSON or binary over HTTP/1.1 and HTTP/2.
//
// An instance keeps no state another instance needs. Every lease lives in
// the store; a lease's handle — key, owner id, token, kind — is all a
// client needs to extend or release it, and any instance does that with
// the store's own owner-checked operations. Instances scale out behind
// any load balancer, with no consensus of their own: the store is the
// distributed part.
//
// What an instance adds:
//
//   - Waiting without polling per waiter: Acquire, Queue, Hold and
//     Campaign wait through the instance's Clients, whose waiters of one
//     key line up and only the first asks the store (or wait in the
//     store's own queue, where it keeps one).
//   - Holding for a client: Hold keeps a lease renewed while its stream
//     is open — the contract "turnstile run" offers, for any language —
//     and says the moment the lease is lost (hold.go, conn.go).
//   - Tenants: bearer tokens with a role, key prefixes and a rate limit
//     (tokens.go, auth.go), TLS with optional client certificates
//     (listen.go).
//   - Operations: Prometheus metrics, readiness that reflects the store,
//     and a drain that hands held leases back to their clients.
//
// Package remote is the Go client: a turnstile backend over the service
// (turnstile://), so that a Client, "turnstile run" and the conformance
// suite use the service as they use a store. docs/service.md describes
// the API, its errors, and how to deploy and size the service.
package service

//go:generate ../scripts/proto.sh

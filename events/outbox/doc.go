// Package outbox makes a database change and its lock event atomic: the
// event is written to the table turnstile_outbox in the
// change's own PostgreSQL transaction (Add), and a Relay publishes it
// afterwards — if and only if the transaction committed.
//
//	tx, _ := pool.Begin(ctx)
//	// ... the change, fenced with lease.Token() ...
//	ev := events.New(events.TypeReleased, lease.Key())
//	ev.Owner, ev.Token = lease.Owner(), lease.Token()
//	_ = outbox.Add(ctx, tx, ev)
//	_ = tx.Commit(ctx)
//
//	relay, _ := outbox.NewRelay(pool, kafkaPublisher)
//	go relay.Run(ctx)
//
// # Delivery
//
// At least once. A relay claims a batch of the oldest unsent rows by
// locking them (SELECT ... FOR UPDATE SKIP LOCKED, in id order) in a
// transaction that it holds while it publishes the batch and waits for
// the broker's acknowledgement; then it marks the rows sent and commits.
// (In full: it locks the oldest unsent rows that are the first unsent row
// of their key, and takes the later unsent rows of those keys along.)
// Other relays skip the locked rows, and find them sent once the
// transaction commits, so relays running in parallel never send a row
// twice in normal operation. A relay that crashes, is killed, or loses
// its connection before committing loses nothing: PostgreSQL rolls its
// transaction back and the rows are unsent and free again at once; a
// relay that hangs (or whose host vanishes without closing the
// connection) loses its rows when PostgreSQL ends its session after twice
// the claim timeout (idle_in_transaction_session_timeout). In those cases
// the events of that batch that reached the broker before the failure
// are sent again: consumers drop repeated event IDs.
//
// The claim is the row lock itself rather than a claimed_until lease
// column: no clock is involved, a dead relay's rows come back as soon as
// its connection closes instead of when a lease expires, and no row can be
// claimed by two relays at once because a lease ran out under a slow one.
// The price is one open transaction per relay for the length of a publish
// (bounded by the claim timeout), holding one pool connection.
//
// # Order
//
// One key's events are published in the order of their row ids, even
// with several relays (less rows moved to the dead-letter table, see
// below): a relay takes up a key only at its oldest unsent
// row, which it locks, and while that lock is held no other relay takes
// any row of the key — the later rows are not the oldest — until the
// batch is sent and committed, or given back whole. Within a batch the
// order is kept by the publisher (Kafka: one partition per key,
// idempotent producer). Row ids are taken when Add runs, so this is the order of
// Add calls as long as one key's events are committed in the order they
// were added — true when the lock holder writes them one transaction
// after another. Events of different keys are published in parallel and
// in no particular order. When a relay fails after part of a batch
// reached the broker, a consumer may see those events again, in order,
// after the first copies; dropping repeated IDs restores the order.
//
// # Undecodable rows: the dead-letter table
//
// A row the relay cannot decode — a payload that is not a valid event of
// this package's events.Version (events.Decode), or an event whose key is
// not the row's key — is never published, and never stops the relay. In
// the claiming transaction it is moved to the table
// turnstile_outbox_dead, with the reason (which names the field at
// fault); when the transaction commits, the relay logs one line at error
// level (row id, key, reason) and counts it: DeadLettered, and with
// WithRegisterer the counter turnstile_outbox_dead_lettered_total, which
// is worth an alert. If the batch fails instead, the move is rolled back
// with the rest of it, and neither logged nor counted. Add writes only
// rows a relay can decode; these rows come from elsewhere: a hand edit, a
// bug, or an event of a newer version added while an older relay runs
// (upgrade relays before the writers).
//
// The later events of the dead row's key are published without it: a
// bad row holds up nothing, neither other keys nor its own. For the
// order of its key this means a gap: consumers see that key's events in
// order, less the dead one. To replay it, fix its payload in place
// (UPDATE turnstile_outbox_dead SET payload = ... WHERE id = ...) and
// call Requeue, which checks it as the relay would and moves it back to
// the outbox as a new row: it is then published after every event its
// key had in the outbox at that moment, out of its original place (its
// timestamp still tells when it happened). Dead rows stay until deleted
// or requeued; Purge does not touch them.
//
// # Events too large for the broker
//
// An event larger than a record may be — the topic's max.message.bytes,
// or the producer's batch limit, such as one with a very long Error —
// is refused by the broker (events.ErrTooLarge), and would be refused
// again on every retry: being the oldest unsent row, it would be claimed
// first and fail every batch, and no later event, of any key, would ever
// be published. When a batch fails so, the relay sends its events again
// one at a time, in order (not those the broker acknowledged, when the
// publisher says which: *events.PublishError), and moves each event that
// is refused on its own as too large to turnstile_outbox_dead, in the
// claiming transaction, with the reason "too large for the broker: …";
// the others are published and marked sent. As for an undecodable row,
// the relay logs one line at error level per row once the transaction
// commits (row id, key, the broker's error) and counts it (DeadLettered,
// turnstile_outbox_dead_lettered_total), and the later events of its key
// are published without it. To send it after all, raise the topic's
// max.message.bytes (and the producer's batch limit,
// kgo.ProducerBatchMaxBytes, for events over 1 MB), then call Requeue.
//
// # Latency
//
// Migrate installs a statement trigger that sends NOTIFY
// turnstile_outbox when rows are added; it reaches listeners when the
// adding transaction commits. Run listens on a connection of its own
// (beyond the pool) and looks for rows as soon as it is woken, and in
// any case every poll interval (WithPollInterval, default 100 ms), so a
// lost notice or a pooler that drops them (WithoutListen) costs latency,
// never an event.
//
// Sent rows stay in the table, with sent_at set, until Purge deletes
// them.
package outbox

// Package consume reads turnstile's lock events from Kafka (the topic
// package events and its outbox publish) and hands each to the
// application once, in each lock key's order, dropping late events that
// would overwrite newer state.
//
//	c, err := consume.New(seeds, "billing", store.LastApplied)
//	defer c.Close()
//	err = c.Run(ctx, func(ctx context.Context, ev events.Event) error {
//		// apply ev and store consume.PositionOf(ev) with it, in one transaction
//	})
//
// # Order and the fenced apply
//
// One key's events are in one partition, in the order they were
// published; Run hands them over in that order, one record at a time. A
// key's applied events have a Position: the fencing token, then the
// stage of the lease (ACQUIRED, EXTENDED, then RELEASED, LOST or
// FORCE_RELEASED), then the time. An event is applied only if its
// position comes after the key's: a late or stale event — an older
// token published after a newer one, a lease's ACQUIRED after its
// RELEASED — is dropped and counted (Stats.Stale), so it never
// overwrites newer state. Events without a token (FAILED: no lease was
// granted) are outside this order and do not move the key's position:
// each is handed over unless its id is among the last four its key
// applied — best effort, since after a restart, or once the key is
// forgotten, a repeated one is handed over again.
//
// # Duplicates, with bounded memory
//
// Delivery is at least once: a relay that dies mid-batch publishes part
// of it again. A repeated event has the position of its first copy, so
// once that copy was applied the repeat is not after the key's position
// and is dropped; when its id is among the last four the key applied it
// is counted as a duplicate (Stats.Duplicates), otherwise as stale.
//
// The consumer keeps, per key, the position of its last applied event
// and those four ids, for at most WithMaxKeys keys (default 65,536, about
// half a kilobyte each plus the key), least recently seen forgotten
// first; it also forgets the keys of partitions a rebalance takes away.
// For a key it does not hold it asks the application: the LastApplied
// function given to New returns the position the Handler stored with the
// key's last change. Exceeding the bound therefore costs one such read
// per forgotten key that comes back, never a stale or repeated apply —
// provided the Handler stores PositionOf(ev) atomically with its change.
// This is also what makes a restart safe: offsets are committed after the
// records are handled, and events handled but not committed when a
// consumer stopped are read again by its successor, which drops them on
// the application's positions.
//
// Two events of one lease at the same stage (two EXTENDED, or LOST
// after FORCE_RELEASED) are ordered by their timestamps, taken by the
// processes that reported them; if those clocks disagree, the later
// report may be dropped as stale. The lease's state is not set back by
// it.
//
// # Offsets, errors and poison records
//
// Automatic commits are off: after the records of a poll are handled,
// Run commits their offsets, and a rebalance waits until then. A record
// whose value is not a lock event (events.Decode refuses it, or its key
// is not the record's) is a poison record: it is counted
// (Stats.Poison), reported to the error handler as a *PoisonError
// (WithErrorHandler; by default logged), and skipped. A failed commit or
// fetch is reported the same way and Run goes on.
//
// A Handler error stops Run: it commits what was handled before, sets
// the consumer back to the failed record and returns the error; the next
// Run, or the next member of the group, starts with that event. With
// WithRetry(n, wait) the Handler is tried n times first. The same holds
// for an error of LastApplied.
//
// Run handles one record at a time, partitions one after another, in one
// goroutine. For more throughput run more consumers in the group, up to
// one per partition.
//
// The counts are in Stats and, with WithRegisterer, in the counter
// turnstile_events_consumed_total{result="applied|duplicate|stale|poison"}.
package consume

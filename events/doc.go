// Package events publishes turnstile lock events to Kafka: one record per
// event on the topic "lock-events", the lock key as the record key, the
// value a versioned JSON Event.
//
//	k, err := events.NewKafka([]string{"kafka1:9092", "kafka2:9092"})
//	defer k.Close()
//	c, err := turnstile.New(backend, turnstile.WithObserver(k))
//
// # Ordering
//
// The record key is the lock key, so all events of one lock go to one
// partition. Kafka is one producer per publisher, idempotent (the
// franz-go default, acks from all in-sync replicas), which keeps each
// partition in the order records were handed to it, across retries. So
// a consumer sees one key's events in the order Observe was called for
// them — ACQUIRED before the RELEASED of the same lease — less any that
// were dropped. Events of different keys have no order between them.
//
// # When Kafka is down
//
// The lock path never waits for Kafka. Observe converts the event and
// hands it to the producer's buffer without blocking; the buffer holds
// up to WithBuffer events (default 65,536) that Kafka has not yet
// acknowledged. While the brokers are unreachable the producer retries
// the buffered events and the buffer fills; every event observed while
// it is full is dropped and counted, as are events whose delivery failed
// for good and events observed after Close. Dropped returns the count,
// and WithRegisterer exposes it as turnstile_events_dropped_total next
// to turnstile_events_published_total. When the brokers come back the
// buffered events are delivered, in order, and new ones are taken again.
// Locks work at normal speed throughout.
//
// The observer path is therefore for monitoring and best-effort audit.
// An audit trail that must not lose an event, or an event that must be
// published if and only if a database change commits, goes through
// package outbox: the event is written in the change's transaction and a
// Relay publishes it with Publish, which waits for the acknowledgement,
// at least once.
//
// # Consumers
//
// Delivery is at least once (a retried publish, a relay that died after
// publishing). Every event carries a unique ID: a consumer that must not
// act twice remembers the ids it has seen. Check Version first: Decode
// does, and refuses anything but a well-formed event of this package's
// Version with a *FieldError that names the field at fault.
//
// Package consume does this for a downstream service: a consumer group
// member that hands each event to the application once, in its key's
// order of fencing tokens, drops a late event whose token is older than
// the last one applied for its key (and counts it), drops repeats with
// per-key state bounded by an LRU of keys — for a key it does not hold it
// asks the application for the position it stored with its last change —
// and commits offsets only after the events were handled.
//
//	c, err := consume.New(seeds, "billing", lastApplied)
//	defer c.Close()
//	err = c.Run(ctx, apply) // apply stores consume.PositionOf(ev) with its change
package events

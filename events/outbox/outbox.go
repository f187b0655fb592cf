package outbox

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnstilelock/turnstile/events"
)

var (
	//go:embed schema.sql
	schemaSQL string
	//go:embed add.sql
	addSQL string
	//go:embed claim.sql
	claimSQL string
	//go:embed mark.sql
	markSQL string
	//go:embed purge.sql
	purgeSQL string
	//go:embed pending.sql
	pendingSQL string
	//go:embed requeue_get.sql
	requeueGetSQL string
	//go:embed requeue.sql
	requeueSQL string
)

// ErrNilDB: a nil Querier or pool was given.
var ErrNilDB = errors.New("turnstile/outbox: nil database")

// ErrNotDead: Requeue was given the id of no row of the dead-letter
// table (never dead-lettered, requeued already, or changed while Requeue
// ran).
var ErrNotDead = errors.New("turnstile/outbox: no such row in turnstile_outbox_dead")

// Querier is what Migrate, Add, Pending and Purge need: a pgx.Tx, a
// *pgx.Conn, a *pgxpool.Pool or a *pgxpool.Conn.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migrate creates the table turnstile_outbox, its indexes and the
// dead-letter table turnstile_outbox_dead if they do not exist. It is safe to run from several processes at once.
func Migrate(ctx context.Context, db Querier) error {
	if isNil(db) {
		return ErrNilDB
	}
	// No arguments: pgx sends the file as one simple query, one
	// transaction.
	if _, err := db.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("turnstile/outbox: migrate: %w", err)
	}
	return nil
}

// Add writes ev to the outbox through tx, which should be the
// transaction that makes the change ev reports: the event is published
// (by a Relay) if and only if the transaction commits. Adding an event
// whose ID is already in the outbox does nothing. An event Validate
// refuses, or with a NUL byte in a string, is refused with a
// *events.FieldError.
func Add(ctx context.Context, tx Querier, ev events.Event) error {
	if isNil(tx) {
		return ErrNilDB
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("turnstile/outbox: add: %w", err)
	}
	for _, f := range [...]struct{ name, v string }{
		{"id", ev.ID}, {"key", ev.Key}, {"owner", ev.Owner}, {"backend", ev.Backend}, {"error", ev.Error},
	} {
		if strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("turnstile/outbox: add: %w", &events.FieldError{Field: f.name, Reason: "holds a NUL byte, which PostgreSQL text and jsonb cannot store"})
		}
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("turnstile/outbox: add: encode event %s: %w", ev.ID, err)
	}
	if _, err := tx.Exec(ctx, addSQL, ev.ID, ev.Key, payload); err != nil {
		return fmt.Errorf("turnstile/outbox: add event %s: %w", ev.ID, err)
	}
	return nil
}

// Requeue moves the row with id (its id in turnstile_outbox, kept in
// turnstile_outbox_dead) from the dead-letter table back to the outbox,
// as a new row: it is published after every event its key has in the
// outbox now. Fix the payload first (UPDATE turnstile_outbox_dead SET
// payload = ... WHERE id = ...): Requeue decodes it as a relay would and
// refuses, with an error naming the field at fault, a payload that would
// only be dead-lettered again. If the event is in the outbox already
// (added again since) the dead row is only removed.
func Requeue(ctx context.Context, db Querier, id int64) error {
	if isNil(db) {
		return ErrNilDB
	}
	var (
		key     string
		payload []byte
	)
	err := db.QueryRow(ctx, requeueGetSQL, id).Scan(&key, &payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: id %d", ErrNotDead, id)
	}
	if err != nil {
		return fmt.Errorf("turnstile/outbox: requeue %d: %w", id, err)
	}
	if _, err := decodeRow(key, payload); err != nil {
		return fmt.Errorf("turnstile/outbox: requeue %d: still undecodable: %w", id, err)
	}
	var moved int64
	var newID *int64
	if err := db.QueryRow(ctx, requeueSQL, id, string(payload)).Scan(&moved, &newID); err != nil {
		return fmt.Errorf("turnstile/outbox: requeue %d: %w", id, err)
	}
	if moved == 0 {
		return fmt.Errorf("%w: id %d", ErrNotDead, id)
	}
	return nil
}

// Pending returns how many events are waiting to be sent.
func Pending(ctx context.Context, db Querier) (int64, error) {
	if isNil(db) {
		return 0, ErrNilDB
	}
	var n int64
	if err := db.QueryRow(ctx, pendingSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("turnstile/outbox: pending: %w", err)
	}
	return n, nil
}

// Purge deletes the events sent before t and returns how many it
// deleted. Unsent events are never deleted.
func Purge(ctx context.Context, db Querier, t time.Time) (int64, error) {
	if isNil(db) {
		return 0, ErrNilDB
	}
	tag, err := db.Exec(ctx, purgeSQL, t)
	if err != nil {
		return 0, fmt.Errorf("turnstile/outbox: purge: %w", err)
	}
	return tag.RowsAffected(), nil
}

// isNil reports a nil interface or a typed nil pointer in one.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

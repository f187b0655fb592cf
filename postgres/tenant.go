package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// A tenant is the schema that holds turnstile's tables. Advisory locks
// are the database's, shared by every schema and every role that may
// connect, so a key's advisory lock id is derived from the tenant and a
// salt of the tenant's: two tenants lock one key under ids of their own,
// and a role that cannot read turnstile_locks, where the salt is kept,
// cannot compute the id of any key.

// ErrLockIDCollision is returned by Acquire when key's advisory lock id
// is held for another key of the tenant (a 64-bit hash collision, about
// one in 2^64 per pair of keys): the two keys cannot be held by two
// Backends at once, so the acquisition fails instead of waiting for the
// other key. The error names the other key.
var ErrLockIDCollision = errors.New("postgres: two keys share one advisory lock id")

const (
	// setUpDoneSQL ends the set-up (schema.sql, kinds.sql): a function
	// whose name carries the set-up's version. setUpCheckSQL tells
	// whether it is there, in the schema the set-up creates its objects
	// in, so that a Dial finding it runs no DDL and takes no set-up lock.
	setUpDoneSQL  = "\nCREATE OR REPLACE FUNCTION turnstile_setup_v2() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 2';\n"
	setUpCheckSQL = `SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'turnstile_setup_v2' AND pronamespace = to_regnamespace(current_schema())::oid)
	AND to_regclass(quote_ident(current_schema()) || '.turnstile_locks') IS NOT NULL
	AND to_regclass(quote_ident(current_schema()) || '.turnstile_holds') IS NOT NULL`

	// tenantSQL names the schema of the turnstile_locks this session uses.
	tenantSQL = `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'turnstile_locks'::regclass`
	// The salt is the token of the empty key's row, made once per tenant.
	saltSQL    = `SELECT token FROM turnstile_locks WHERE key = ''`
	newSaltSQL = `INSERT INTO turnstile_locks (key, owner, token, expires_at) VALUES ('', '', $1, '-infinity') ON CONFLICT (key) DO NOTHING`

	// outsideSQL finds the session that holds advisory lock id $1 in this
	// database (pg_locks shows a bigint id as its high and low halves),
	// with what the server says of it to any role, and whether it is
	// inside a transaction (it holds its virtual transaction id), unless
	// it is this session.
	outsideSQL = `SELECT l.pid, coalesce(a.usename, ''), coalesce(a.application_name, ''), coalesce(host(a.client_addr), ''),
	l.pid <> pg_backend_pid() AND EXISTS (SELECT 1 FROM pg_locks v WHERE v.pid = l.pid AND v.locktype = 'virtualxid' AND v.granted)
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = (($1::bigint >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid
LIMIT 1`
)

// settleWait bounds how long Inspect waits for the transaction of a
// session that holds a key's advisory lock without a live lease: an
// acquisition takes the advisory lock before its row commits.
const settleWait = time.Second

// setUp creates turnstile's tables and functions unless this version's
// set-up is done in the session's schema, and returns the lock id
// function of the tenant.
func setUp(ctx context.Context, conn *pgx.Conn) (func(key string) int64, error) {
	var done bool
	if err := conn.QueryRow(ctx, setUpCheckSQL).Scan(&done); err != nil {
		return nil, fmt.Errorf("create schema: %w", permission(err))
	}
	if !done {
		if _, err := conn.Exec(ctx, schemaSQL+kindsSQL+setUpDoneSQL); err != nil {
			return nil, fmt.Errorf("create schema: %w", permission(err))
		}
	}
	var schema string
	if err := conn.QueryRow(ctx, tenantSQL).Scan(&schema); err != nil {
		return nil, fmt.Errorf("find turnstile_locks: %w", permission(err))
	}
	salt, err := readSalt(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("read the tenant's salt: %w", permission(err))
	}
	return lockIDs(salt, schema), nil
}

// readSalt returns the tenant's salt, making it if it has none.
func readSalt(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var salt int64
	err := conn.QueryRow(ctx, saltSQL).Scan(&salt)
	if !errors.Is(err, pgx.ErrNoRows) {
		return salt, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	// A Dial that makes it at the same time waits for the other's
	// insert, then keeps the other's salt.
	if _, err := conn.Exec(ctx, newSaltSQL, int64(binary.BigEndian.Uint64(b[:]))); err != nil {
		return 0, err
	}
	err = conn.QueryRow(ctx, saltSQL).Scan(&salt)
	return salt, err
}

// lockIDs returns the advisory lock id of each key of tenant schema with
// salt: the first 64 bits of HMAC-SHA256(salt, schema NUL key). Schema
// names hold no NUL, so no two (schema, key) pairs hash the same input.
func lockIDs(salt int64, schema string) func(key string) int64 {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(salt))
	return func(key string) int64 {
		m := hmac.New(sha256.New, k[:])
		m.Write([]byte(schema))
		m.Write([]byte{0})
		m.Write([]byte(key))
		return int64(binary.BigEndian.Uint64(m.Sum(nil)[:8]))
	}
}

// inspectOutside completes st, key's state as its row tells, when the
// row has no live lease: if a session holds key's advisory lock all the
// same, st is held by a holder whose owner says what the server tells of
// the session (pid, user, application, client address; never a secret)
// and whose TTL is -1, the lock lasting as long as the session. Such a
// session is a holder paused or removed past its lease that has not let
// go yet, or any role that may connect and took the id.
//
// An acquisition takes the advisory lock in the transaction that writes
// its row, so the lock shows before the row does: while the holding
// session is inside a transaction, Inspect waits for it to end (at most
// settleWait, and then reports it anyway) and reads the row again.
func inspectOutside(ctx context.Context, conn *pgx.Conn, key string, id int64, st driver.LockState) (driver.LockState, error) {
	deadline := time.Now().Add(settleWait)
	for {
		var (
			pid                int32
			user, app, address string
			busy               bool
		)
		err := conn.QueryRow(ctx, outsideSQL, id).Scan(&pid, &user, &app, &address, &busy)
		if errors.Is(err, pgx.ErrNoRows) {
			return st, nil
		}
		if err != nil {
			return driver.LockState{}, err
		}
		if busy && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return driver.LockState{}, ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
			continue
		}
		// The holder's transaction, if any, ended after its row was
		// read: read it again.
		if st, err = readState(ctx, conn, inspectSQL, key); err != nil || st.Held {
			return st, err
		}
		who := []string{fmt.Sprintf("pid %d", pid)}
		if user != "" {
			who = append(who, "user "+user)
		}
		if app != "" {
			who = append(who, fmt.Sprintf("application %q", app))
		}
		if address != "" {
			who = append(who, "client "+address)
		}
		st.Held = true
		st.Holders = []driver.Holder{{Owner: "(advisory lock held without a lease: " + strings.Join(who, ", ") + ")", TTL: -1}}
		return st, nil
	}
}

// checkKey refuses the empty key, whose row holds the tenant's salt.
func (b *Backend) checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: %s: empty key", turnstile.ErrInvalidKey, b.name)
	}
	return nil
}

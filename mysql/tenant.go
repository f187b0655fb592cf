package mysql

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// A tenant is the database that holds turnstile's tables. User-lock
// names are the server's, shared by every database and every account
// that may connect (GET_LOCK needs no privilege), so a key's user lock is
// named after the tenant and a salt of the tenant's: two tenants lock one
// key under names of their own, and an account that cannot read
// turnstile_locks, where the salt is kept, cannot compute the name of any
// key.

const (
	// The salt is the token of the empty name's row, made once per
	// tenant; no key has that name, and the row is never live.
	sqlSalt    = `SELECT token FROM turnstile_locks WHERE name = ''`
	sqlNewSalt = `INSERT INTO turnstile_locks (name, token, owner, expires_at) VALUES ('', ?, '', '1970-01-02')
ON DUPLICATE KEY UPDATE name = name`
	// sqlOutside finds the session that holds a user lock, and what the
	// server shows of it to this account: its user, client address and
	// whether it runs a statement now, with the PROCESS privilege or when
	// it is this account's; else nothing but its id (seen is false).
	sqlOutside = `SELECT u.id, COALESCE(p.USER, ''), COALESCE(p.HOST, ''), p.ID IS NOT NULL,
	u.id <> CONNECTION_ID() AND COALESCE(p.COMMAND, 'Sleep') <> 'Sleep'
FROM (SELECT IS_USED_LOCK(?) AS id) u LEFT JOIN information_schema.PROCESSLIST p ON p.ID = u.id
WHERE u.id IS NOT NULL`
)

// settleWait bounds how long Inspect waits for the statement of a
// session that holds a key's user lock without a live lease: an
// acquisition takes the user lock before its row commits. settlePause is
// how long it waits when it cannot see the session's state.
const (
	settleWait  = time.Second
	settlePause = 50 * time.Millisecond
)

// userLockPrefix starts every user-lock name turnstile takes, so that an
// operator can tell them apart in the server's lists of locks.
const userLockPrefix = "turnstile:"

// ref is where a key is locked: the row's name (LockName) and the user
// lock's.
type ref struct{ name, lock string }

// ref returns key's names in b's tenant.
func (b *Backend) ref(key string) ref { return ref{name: LockName(key), lock: b.userLock(key)} }

// loadTenant reads the tenant's database and salt, making the salt if it
// has none, and so fixes userLock.
func (b *Backend) loadTenant(ctx context.Context, c *sql.Conn) error {
	var db sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&db); err != nil {
		return err
	}
	var salt uint64
	err := c.QueryRowContext(ctx, sqlSalt).Scan(&salt)
	if errors.Is(err, sql.ErrNoRows) {
		var r [8]byte
		_, _ = rand.Read(r[:])
		// A Dial that makes it at the same time finds the other's row
		// and keeps it.
		if _, err = c.ExecContext(ctx, sqlNewSalt, binary.BigEndian.Uint64(r[:])); err == nil {
			err = c.QueryRowContext(ctx, sqlSalt).Scan(&salt)
		}
	}
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint64(b.salt[:], salt)
	b.tenant = db.String
	return nil
}

// userLock is the GET_LOCK name of key in b's tenant: the prefix and 54
// hex digits (216 bits) of HMAC-SHA256(salt, database NUL key), 64
// characters in all. Database names hold no NUL, so no two (database,
// key) pairs hash the same input.
func (b *Backend) userLock(key string) string {
	m := hmac.New(sha256.New, b.salt[:])
	m.Write([]byte(b.tenant))
	m.Write([]byte{0})
	m.Write([]byte(key))
	return (userLockPrefix + hex.EncodeToString(m.Sum(nil)))[:maxNameLen]
}

// inspectOutside completes st, key's state as its row tells, when the
// row has no live lease: if a session holds key's user lock all the same,
// st is held by a holder whose owner says what the server shows of the
// session (connection id; user and client address where this account may
// see them; never a secret) and whose TTL is -1, the lock lasting as long
// as the session. Such a session is a holder paused or removed past its
// lease that has not let go yet, or any account that took the name.
//
// An acquisition takes the user lock in the statement that writes its
// row, so the lock shows before the row does: while the holding session
// runs a statement, Inspect waits for it to end (at most settleWait, and
// then reports it anyway), or, when it cannot see the session's state,
// for settlePause; then it reads the row again.
func inspectOutside(ctx context.Context, c *sql.Conn, key string, r ref, st driver.LockState) (driver.LockState, error) {
	deadline := time.Now().Add(settleWait)
	for paused := false; ; {
		var (
			id         uint64
			user, host string
			seen, busy bool
		)
		err := c.QueryRowContext(ctx, sqlOutside, r.lock).Scan(&id, &user, &host, &seen, &busy)
		if errors.Is(err, sql.ErrNoRows) {
			return st, nil
		}
		if err != nil {
			return driver.LockState{}, err
		}
		wait := time.Duration(0)
		switch {
		case busy && time.Now().Before(deadline):
			wait = 2 * time.Millisecond
		case !seen && !paused:
			wait, paused = settlePause, true
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return driver.LockState{}, ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		// The holder's statement, if any, ended after its row was read:
		// read it again.
		if st, err = readState(ctx, c.QueryRowContext, sqlInspect, key, r.name); err != nil || st.Held {
			return st, err
		}
		who := []string{fmt.Sprintf("connection %d", id)}
		if user != "" {
			who = append(who, "user "+user)
		}
		if host != "" {
			who = append(who, "client "+host)
		}
		if !seen {
			who = append(who, "its user shown only with the PROCESS privilege")
		}
		st.Held = true
		st.Holders = []driver.Holder{{Owner: "(user lock held without a lease: " + strings.Join(who, ", ") + ")", TTL: -1}}
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

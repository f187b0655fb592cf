package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnstilelock/turnstile"
)

// insufficientPrivilege is the SQLSTATE of "permission denied for table
// turnstile_locks", "must be owner of function turnstile_acquire" and the
// like.
const insufficientPrivilege = "42501"

// permission marks err as turnstile.ErrPermission when the server refused
// for want of a privilege; its message, which names what was refused,
// stays as it is.
func permission(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == insufficientPrivilege {
		return permissionError{err}
	}
	return err
}

// permissionError is a server's error that is also turnstile.ErrPermission.
type permissionError struct{ error }

func (e permissionError) Unwrap() []error { return []error{e.error, turnstile.ErrPermission} }

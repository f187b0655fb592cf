package mysql

import (
	"errors"
	"fmt"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/turnstilelock/turnstile"
)

// deniedCodes are the server's errors for a statement or database the
// account has no privilege for, such as 1142 "INSERT command denied to
// user 'app'@'10.0.0.7' for table `locks`.`turnstile_locks`". A wrong
// password (1045) is not one of them.
var deniedCodes = map[uint16]bool{
	1044: true, // ER_DBACCESS_DENIED_ERROR: access denied to a database
	1142: true, // ER_TABLEACCESS_DENIED_ERROR: a command denied on a table
	1143: true, // ER_COLUMNACCESS_DENIED_ERROR: a command denied on a column
	1227: true, // ER_SPECIFIC_ACCESS_DENIED_ERROR: a global privilege needed
	1370: true, // ER_PROCACCESS_DENIED_ERROR: a routine denied
}

// permission marks err as turnstile.ErrPermission when the server refused
// for want of a privilege; its message, which names what was refused,
// stays as it is.
func permission(err error) error {
	var me *gomysql.MySQLError
	if errors.As(err, &me) && deniedCodes[me.Number] {
		return permissionError{err}
	}
	return err
}

// permissionError is a server's error that is also turnstile.ErrPermission.
type permissionError struct{ error }

func (e permissionError) Unwrap() []error { return []error{e.error, turnstile.ErrPermission} }

// accessDenied is the server's error for a login it refused: a wrong
// user or password, or an account that requires TLS (REQUIRE SSL, X509)
// reached without it, which the server does not tell apart.
const accessDenied = 1045

// loginHint adds to a refused login what else than the password the
// account may require: TLS, for a login over plain text; a client
// certificate, for a login over TLS without one.
func loginHint(err error, cfg *gomysql.Config) error {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != accessDenied {
		return err
	}
	switch {
	case cfg.TLS == nil && (cfg.TLSConfig == "" || cfg.TLSConfig == "false"):
		return fmt.Errorf("%w (over plain text: if the account requires TLS, give ca_file or tls=true)", err)
	case cfg.TLS == nil || len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetClientCertificate == nil:
		return fmt.Errorf("%w (with no client certificate: if the account requires a client certificate, give cert_file and key_file)", err)
	}
	return err
}

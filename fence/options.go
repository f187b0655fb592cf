package fence

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/turnstilelock/turnstile"
)

// DefaultTable is the PostgreSQL table Migrate creates and NewPostgres
// uses unless WithTable names another.
const DefaultTable = "turnstile_fences"

// config is what the options set; each guard refuses the options that do
// not apply to it.
type config struct {
	allowSame bool
	table     string // quoted identifier, "" for DefaultTable
	tableName string // as given to WithTable
	prefix    string // Redis key prefix, from WithKeysOf
	keysOf    bool   // WithKeysOf was given
}

// Option configures a guard.
type Option func(*config) error

// AllowSameToken makes the guard accept a write whose token equals the
// last accepted one, so that one lease may write several times. By
// default a guard refuses every token not greater than the
// last accepted one: each lease writes once.
func AllowSameToken() Option {
	return func(c *config) error {
		c.allowSame = true
		return nil
	}
}

// KeyPrefixer is a Redis lock backend that names its keys under a prefix:
// *redis.Backend (WithPrefix, the prefix= of its URL).
type KeyPrefixer interface {
	KeyPrefix() string
}

// WithKeysOf makes the Redis guard name its keys as the Redis lock
// backend b names its own: under b's key prefix (P{R}:guard, with
// DataKey giving P{R}:name). Then the guard key is the one b's forced
// release raises, and it lies inside the prefix an ACL gives the
// backend's user. Without it, the guard's keys have no prefix, which
// agrees only with a backend that has none: give it whenever the
// backend's keys have a prefix. Redis only.
func WithKeysOf(b KeyPrefixer) Option {
	return func(c *config) error {
		if b == nil {
			return fmt.Errorf("%w: WithKeysOf(nil)", turnstile.ErrInvalidOption)
		}
		if v := reflect.ValueOf(b); v.Kind() == reflect.Pointer && v.IsNil() {
			return fmt.Errorf("%w: WithKeysOf(nil %T)", turnstile.ErrInvalidOption, b)
		}
		p := b.KeyPrefix()
		if strings.ContainsAny(p, "{}") {
			return fmt.Errorf("%w: key prefix %q of %T contains a brace", turnstile.ErrInvalidOption, p, b)
		}
		c.prefix, c.keysOf = p, true
		return nil
	}
}

// identifier is a lower-case SQL name: quoted, it means what it means
// unquoted, and a reserved word still works.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// WithTable makes the PostgreSQL guard keep its tokens in table instead of
// DefaultTable: a lower-case name, optionally schema-qualified
// ("app.fences"). Create it with (*Postgres).Migrate. PostgreSQL only.
func WithTable(table string) Option {
	return func(c *config) error {
		parts := strings.Split(table, ".")
		if len(parts) > 2 {
			return fmt.Errorf("%w: fence table %q: want table or schema.table", turnstile.ErrInvalidOption, table)
		}
		for _, p := range parts {
			if !identifier.MatchString(p) {
				return fmt.Errorf("%w: fence table %q: each name must be 1 to 63 lower-case letters, digits or '_', not starting with a digit", turnstile.ErrInvalidOption, table)
			}
		}
		c.table = pgx.Identifier(parts).Sanitize()
		c.tableName = table
		return nil
	}
}

func newConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("%w: nil fence option", turnstile.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// postgresOnly refuses the options a Redis or in-memory guard cannot use.
func (c config) postgresOnly(guard string) error {
	if c.tableName != "" {
		return fmt.Errorf("%w: WithTable(%q) applies to the PostgreSQL guard, not the %s one", turnstile.ErrInvalidOption, c.tableName, guard)
	}
	return nil
}

// redisOnly refuses the options a PostgreSQL or in-memory guard cannot
// use.
func (c config) redisOnly(guard string) error {
	if c.keysOf {
		return fmt.Errorf("%w: WithKeysOf applies to the Redis guard, not the %s one", turnstile.ErrInvalidOption, guard)
	}
	return nil
}

// checkResource refuses what no backend accepts as a lock key either.
func checkResource(resource string) error {
	if resource == "" {
		return fmt.Errorf("%w: empty fence resource", turnstile.ErrInvalidKey)
	}
	if len(resource) > turnstile.MaxKeyLen {
		return fmt.Errorf("%w: fence resource is %d bytes, longer than %d", turnstile.ErrInvalidKey, len(resource), turnstile.MaxKeyLen)
	}
	return nil
}

func checkToken(token uint64) error {
	if token == 0 {
		return fmt.Errorf("%w: token 0 (every lease's token is at least 1)", ErrInvalidToken)
	}
	return nil
}

func checkContext(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	return nil
}

package stock

import (
	"errors"
	"fmt"

	"github.com/turnstilelock/turnstile"
)

// Outcomes of an order, checked with errors.Is.
var (
	// ErrSoldOut: fewer units are left than the order asked for. Nothing
	// was taken.
	ErrSoldOut = errors.New("turnstile/stock: sold out")

	// ErrConflict: CAS lost the race for the row on every attempt its
	// retries allowed. Nothing was taken; the caller may retry the order.
	ErrConflict = errors.New("turnstile/stock: concurrent updates, retries used up")

	// ErrInvalidQuantity: a quantity to take or put is not positive, a
	// total to set is negative, or either is above MaxQuantity.
	ErrInvalidQuantity = errors.New("turnstile/stock: invalid quantity")
)

// MaxQuantity is the largest quantity any call accepts, and the most a
// Sharded stock may hold in all: its scripts compute in Lua numbers,
// which are exact integers up to 2^53.
const MaxQuantity = 1 << 53

// checkQuantity refuses a quantity to take or put.
func checkQuantity(n int64) error {
	if n <= 0 || n > MaxQuantity {
		return fmt.Errorf("%w: %d is outside [1, 2^53]", ErrInvalidQuantity, n)
	}
	return nil
}

// checkTotal refuses a stock level to set.
func checkTotal(n int64) error {
	if n < 0 || n > MaxQuantity {
		return fmt.Errorf("%w: total %d is outside [0, 2^53]", ErrInvalidQuantity, n)
	}
	return nil
}

// checkKey refuses a key (or row id) that is empty or too long.
func checkKey(what, key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty %s", turnstile.ErrInvalidKey, what)
	}
	if len(key) > turnstile.MaxKeyLen {
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", turnstile.ErrInvalidKey, what, len(key), turnstile.MaxKeyLen)
	}
	return nil
}

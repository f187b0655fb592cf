package mysql

import (
	"database/sql"
	"fmt"

	"github.com/turnstilelock/turnstile"
)

// The holders of a key in turnstile_holds, and which of them keep an
// acquisition out.

// permitsError is a semaphore acquisition with a number of permits other
// than the stored one.
type permitsError struct{ error }

// holder is a row of turnstile_holds.
type holder struct {
	kind, owner    string
	depth, permits int
	token          uint64
	live           bool
}

func scanHolders(rows *sql.Rows, err error) ([]holder, error) {
	if err != nil {
		return nil, err
	}
	var hs []holder
	for rows.Next() {
		var h holder
		if err := rows.Scan(&h.kind, &h.owner, &h.depth, &h.permits, &h.token, &h.live); err != nil {
			_ = rows.Close()
			return nil, err
		}
		hs = append(hs, h)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return hs, rows.Err()
}

// refused reports whether the live holders hs keep owner out of key; an
// error when a semaphore's permits are held with another number. A
// reentrant holder's own re-entry is not refused.
func (v *kindView) refused(key, owner string, hs []holder) (bool, error) {
	mine := false // owner holds the key in this view's kind already
	for _, h := range hs {
		if h.kind == v.Kind && h.owner == owner {
			mine = true
		}
	}
	others := 0
	for _, h := range hs {
		switch {
		case v.Kind == "reentrant" && h.kind == "reentrant" && h.owner != owner:
			return true, nil
		case v.Kind == "semaphore" && h.kind == "semaphore":
			if h.permits != v.Permits {
				return true, fmt.Errorf("%w: semaphore %q is held with %d permits, not %d", turnstile.ErrInvalidOption, key, h.permits, v.Permits)
			}
			if h.owner != owner {
				others++
			}
		case v.Kind == "read" && !mine && (h.kind == "write" || h.kind == "claim"):
			return true, nil
		case v.Kind == "write" && (h.kind == "read" || h.kind == "write" && h.owner != owner):
			return true, nil
		}
	}
	return v.Kind == "semaphore" && others >= v.Permits, nil
}

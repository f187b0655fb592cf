package admission

import (
	"fmt"
	"math"
	"time"

	"github.com/turnstilelock/turnstile"
)

// Bounds of a Limit.
const (
	// MaxRate is the highest Rate a Limit may have, a million admissions a
	// second per key: far above what one Redis key can serve, and the
	// highest at which the shared limiter still counts time precisely
	// (it keeps µs on the server clock).
	MaxRate = 1e6

	// MaxBatch is the most requests one AdmitN admits.
	MaxBatch = 1024

	// MaxWindow is the longest a key may take to earn a full burst back
	// (Burst / Rate). An idle key's state lives that long in Redis.
	MaxWindow = 365 * 24 * time.Hour
)

// Limit is how often one key may be admitted: on average Rate times a
// second, and up to Burst times at once after a quiet spell. Rate 1000,
// Burst 20 admits 20 requests at once, then one per millisecond. Burst
// also absorbs pauses: when every requester of a key stalls (a GC pause,
// a busy machine) for less than Burst/Rate, the admissions it missed are
// made up when it resumes.
type Limit struct {
	// Rate is the number of admissions per second, in (0, MaxRate].
	Rate float64
	// Burst is the number of admissions that may happen at the same
	// instant, at least 1; Burst / Rate must not exceed MaxWindow.
	Burst int
}

// check refuses a Limit that cannot work.
func (l Limit) check() error {
	if math.IsNaN(l.Rate) || l.Rate <= 0 || l.Rate > MaxRate {
		return fmt.Errorf("%w: admission rate %v per second must be in (0, %g]", turnstile.ErrInvalidOption, l.Rate, float64(MaxRate))
	}
	if l.Burst < 1 {
		return fmt.Errorf("%w: admission burst %d must be at least 1", turnstile.ErrInvalidOption, l.Burst)
	}
	if float64(l.Burst)/l.Rate > MaxWindow.Seconds() {
		return fmt.Errorf("%w: admission burst %d at %v per second takes longer than %v to refill",
			turnstile.ErrInvalidOption, l.Burst, l.Rate, MaxWindow)
	}
	return nil
}

// interval is the time between two admissions at the limit's rate, in µs.
func (l Limit) interval() float64 { return 1e6 / l.Rate }

package claim

import (
	"errors"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile"
)

// Outcomes of a redemption or of a job's claim, checked with errors.Is.
var (
	// ErrUsed: the coupon was already redeemed by another redeemer. The
	// error is a *UsedError that says by whom and when.
	ErrUsed = errors.New("turnstile/claim: coupon already used")

	// ErrUnknownCode: no coupon with this code was issued.
	ErrUnknownCode = errors.New("turnstile/claim: unknown coupon code")

	// ErrClaimLost: the job is no longer claimed under this claim: its
	// lease passed and another claim took it (the attempt moved on), or it
	// was released or completed under another claim. The error is a
	// *LostError that says what the job is now. The worker must stop
	// working on the job and must not write its result: another worker
	// owns it.
	ErrClaimLost = errors.New("turnstile/claim: job claim lost")

	// ErrUnknownJob: no job with this id is in the queue.
	ErrUnknownJob = errors.New("turnstile/claim: unknown job")

	// ErrInvalidArgument: a count or a duration passed to a method is
	// out of its range (a claim of no jobs, a negative delay).
	ErrInvalidArgument = errors.New("turnstile/claim: invalid argument")

	// ErrUnsupportedServer: the database server lacks what the package
	// needs (FOR UPDATE SKIP LOCKED comes with MySQL 8.0 and MariaDB
	// 10.6).
	ErrUnsupportedServer = errors.New("turnstile/claim: unsupported database server")
)

// UsedError is the outcome of a redemption of a coupon that another
// redeemer redeemed first. It matches ErrUsed.
type UsedError struct {
	Code string
	By   string    // who redeemed it
	At   time.Time // when, by the store's clock
}

func (e *UsedError) Error() string {
	return fmt.Sprintf("turnstile/claim: coupon %q already used by %q at %s", e.Code, e.By, e.At.UTC().Format(time.RFC3339Nano))
}

// Unwrap returns ErrUsed.
func (e *UsedError) Unwrap() error { return ErrUsed }

// LostError is the refusal of a Complete, Release or Heartbeat for a claim
// that is not the job's current one. It matches ErrClaimLost.
type LostError struct {
	ID      int64
	Attempt int64 // the attempt of the refused claim
	// Status, NowAttempt and NowWorker are the job's state when the call
	// was refused: another worker's claim, a later attempt, or done.
	Status     Status
	NowAttempt int64
	NowWorker  string
}

func (e *LostError) Error() string {
	switch {
	case e.Status == StatusDone:
		return fmt.Sprintf("turnstile/claim: job %d attempt %d refused: the job was completed by attempt %d", e.ID, e.Attempt, e.NowAttempt)
	case e.NowAttempt > e.Attempt && e.Status == StatusClaimed:
		return fmt.Sprintf("turnstile/claim: job %d attempt %d refused: its lease passed and worker %q holds attempt %d", e.ID, e.Attempt, e.NowWorker, e.NowAttempt)
	default:
		return fmt.Sprintf("turnstile/claim: job %d attempt %d refused: the job is %s at attempt %d", e.ID, e.Attempt, e.Status, e.NowAttempt)
	}
}

// Unwrap returns ErrClaimLost.
func (e *LostError) Unwrap() error { return ErrClaimLost }

// MaxNameLen is the longest coupon code, redeemer, queue name or worker
// id, in bytes: the width of their columns.
const MaxNameLen = 255

// checkName refuses an empty or over-long code, redeemer, queue or
// worker.
func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", turnstile.ErrInvalidKey, what)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", turnstile.ErrInvalidKey, what, len(s), MaxNameLen)
	}
	return nil
}

// checkCodes refuses a batch of codes to issue that is empty or holds a
// bad code.
func checkCodes(codes []string) error {
	if len(codes) == 0 {
		return fmt.Errorf("%w: no coupon codes to issue", ErrInvalidArgument)
	}
	for i, c := range codes {
		if err := checkName("coupon code", c); err != nil {
			return fmt.Errorf("code %d of %d: %w", i+1, len(codes), err)
		}
	}
	return nil
}

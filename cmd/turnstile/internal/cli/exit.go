package cli

// Exit codes of turnstile itself. Where sysexits.h has a fitting code it
// is used, so that scripts can tell "the lock was busy" (try later) from
// "the store is down" (page someone) from the command's own failures.
const (
	ExitOK          = 0
	ExitUsage       = 64  // EX_USAGE: bad flags or arguments
	ExitUnavailable = 69  // EX_UNAVAILABLE: the lock store is unreachable or failing
	ExitNotAcquired = 75  // EX_TEMPFAIL: another owner holds the lock
	ExitLeaseLost   = 79  // the lease was lost while the command ran
	ExitCannotRun   = 126 // the command exists but could not be started (as in sh)
	ExitNotFound    = 127 // the command was not found (as in sh)
	ExitSignalBase  = 128 // 128+N: killed or interrupted by signal N (as in sh)
)

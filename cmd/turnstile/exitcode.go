package main

import "github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"

// Exit codes of turnstile itself, as package cli defines them for every
// command (the demo too).
const (
	exitOK          = cli.ExitOK
	exitUsage       = cli.ExitUsage
	exitUnavailable = cli.ExitUnavailable
	exitNotAcquired = cli.ExitNotAcquired
	exitLeaseLost   = cli.ExitLeaseLost
	exitCannotRun   = cli.ExitCannotRun
	exitNotFound    = cli.ExitNotFound
	exitSignalBase  = cli.ExitSignalBase
)

// exitCodeHelp is the exit-code table shown by "turnstile run -h".
const exitCodeHelp = `Exit status:
  0-255  the command's own exit status, when it ran to its end while the
         lock was held (a command that itself exits 64, 69, 75 or 79 cannot
         be told apart from turnstile; the message on stderr can)
  64     usage error: bad flag, duration, key or backend URL (a database
         the server does not have included), a --ttl under 200ms or longer
         than the URL's session_timeout, a lock kind the store does not
         have, a --metrics-addr that cannot be listened on, missing "--"
         or command
  69     the lock store is unreachable or failing, refused the TLS
         handshake or the credentials, refused a permission turnstile
         needs (docs/security.md), or did not answer within --wait
  75     lock not acquired: another owner holds it (--no-wait), or --wait
         expired
  79     lease lost: the lock was lost while the command ran (the command
         was stopped), or had already expired when it finished; its work
         may have overlapped with another holder's
  126    the command could not be started
  127    the command was not found
  128+N  the command died of signal N, or turnstile got signal N while
         waiting for the lock (the command never started)
`

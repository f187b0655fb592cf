package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
	"github.com/turnstilelock/turnstile/driver"
)

// defaultBackend is the store "turnstile run" uses when neither --backend
// nor TURNSTILE_BACKEND names one. Tests point it at a port where nothing
// listens; nothing else changes it.
var defaultBackend = "redis://127.0.0.1:6379"

// defaultGrace is how long a command whose lease was lost gets between
// SIGTERM and SIGKILL.
const defaultGrace = 10 * time.Second

// runOptions is a parsed and checked "turnstile run" command line.
type runOptions struct {
	backend string
	// backendFrom says where backend came from, for messages: "--backend",
	// "$TURNSTILE_BACKEND", ..., or "" for defaultBackend.
	backendFrom string
	// passBackend (--pass-backend) gives the command the store's URL as
	// $TURNSTILE_BACKEND; without it the command gets none.
	passBackend bool
	key         string
	ttl         time.Duration
	lockDelay   time.Duration // --lock-delay; 0: none
	wait        time.Duration // 0: wait until acquired
	noWait      bool
	grace       time.Duration
	argv        []string
	// metricsAddr serves /metrics there while turnstile runs.
	metricsAddr string
	// clientOpts go to the Client (the metrics observer).
	clientOpts []turnstile.Option
	// kind is the lock kind: plain, or the one a kind flag names.
	kind lockKind
	// permits is --semaphore's N.
	permits int
	// closers close what acquire opened besides the Client it returns,
	// last first.
	closers []func() error
	// leader is --leader's election name: run the command while leading
	// it instead of holding the lock on --key.
	leader string
	// value is --value: what observers of the election see.
	value string
	// env is added to the command's environment (the leader's term and
	// value).
	env []string
}

// lockKind is the kind of lock "turnstile run" takes.
type lockKind int

const (
	kindPlain     lockKind = iota
	kindShared             // --shared: the read side of KEY's read-write lock
	kindExclusive          // --exclusive: its write side
	kindSemaphore          // --semaphore N
	kindFair               // --fair: the plain lock, waiting in a FIFO queue
)

// kindFlags are the flags that choose a lock kind, of which one at most
// may be given.
var kindFlags = []string{"shared", "exclusive", "semaphore", "fair"}

// permitsFlag is --semaphore N.
type permitsFlag struct{ n *int }

func (p permitsFlag) String() string {
	if p.n == nil {
		return "0"
	}
	return strconv.Itoa(*p.n)
}

func (p permitsFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || driver.CheckPermits(n) != nil {
		return fmt.Errorf("want a number of holders from 1 to %d", driver.MaxPermits)
	}
	*p.n = n
	return nil
}

// newRunFlagSet returns the flags of "turnstile run", parsed into o and the
// values it returns.
func newRunFlagSet(o *runOptions) (fs *flag.FlagSet, backend *cli.BackendFlags, ttl, wait, grace *durationFlag) {
	fs = cli.NewFlagSet("run")
	backend = &cli.BackendFlags{}
	backend.Register(fs, "backend")
	fs.StringVar(&o.key, "key", "", "")
	ttl, wait, grace = new(durationFlag(turnstile.DefaultTTL)), new(durationFlag(0)), new(durationFlag(defaultGrace))
	fs.Var(ttl, "ttl", "")
	fs.Var((*durationFlag)(&o.lockDelay), "lock-delay", "")
	fs.Var(wait, "wait", "")
	fs.BoolVar(&o.noWait, "no-wait", false, "")
	fs.Var(grace, "grace", "")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "")
	fs.Bool("shared", false, "")
	fs.Bool("exclusive", false, "")
	fs.Var(permitsFlag{&o.permits}, "semaphore", "")
	fs.Bool("fair", false, "")
	fs.StringVar(&o.leader, "leader", "", "")
	fs.StringVar(&o.value, "value", "", "")
	fs.BoolVar(&o.passBackend, "pass-backend", false, "")
	return fs, backend, ttl, wait, grace
}

func parseRun(args []string) (*runOptions, error) {
	if len(args) == 0 {
		return nil, errors.New(`missing --key KEY, "--" and the command: turnstile run --key KEY -- COMMAND [ARG...]`)
	}
	o := &runOptions{}
	fs, backend, ttl, wait, grace := newRunFlagSet(o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var kinds []string
	fs.Visit(func(f *flag.Flag) {
		for i, k := range kindFlags {
			if f.Name == k && f.Value.String() != "false" {
				kinds = append(kinds, "--"+k)
				o.kind = lockKind(i + 1)
			}
		}
	})
	if len(kinds) > 1 {
		return nil, fmt.Errorf("%s exclude each other: a lock is of one kind", strings.Join(kinds, " and "))
	}
	b, from, err := backend.Resolve(os.Getenv)
	if err != nil {
		return nil, err
	}
	if b == "" {
		b = defaultBackend
	}
	o.backend, o.backendFrom = b, from
	o.ttl, o.wait, o.grace = time.Duration(*ttl), time.Duration(*wait), time.Duration(*grace)

	// flag stops at "--" or at the first argument that is not a flag; only
	// the first is accepted, so that a mistyped flag after the key can
	// never be run as the command.
	rest := fs.Args()
	if consumed := len(args) - len(rest); consumed == 0 || args[consumed-1] != "--" {
		if len(rest) > 0 {
			return nil, fmt.Errorf("missing \"--\" before the command %s", cli.QuoteArg(rest[0]))
		}
		return nil, errors.New(`missing "--" and the command to run after the flags: turnstile run [flags] -- COMMAND [ARG...]`)
	}
	if len(rest) == 0 || rest[0] == "" {
		return nil, errors.New("no command after \"--\"")
	}
	o.argv = rest

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := o.checkLeader(kinds, set); err != nil {
		return nil, err
	}
	if err := o.check(set["wait"]); err != nil {
		return nil, err
	}
	if err := o.checkLockDelay(kinds); err != nil {
		return nil, err
	}
	if o.lockDelay > 0 {
		o.clientOpts = append(o.clientOpts, turnstile.WithLockDelay(o.lockDelay))
	}
	return o, nil
}

// checkLeader checks --leader and --value. With --leader the election's
// name is the key of the lock the leader holds, so o.key takes it and
// the rest of the checks and messages apply to it.
func (o *runOptions) checkLeader(kinds []string, set map[string]bool) error {
	if o.leader == "" {
		switch {
		case set["leader"]:
			return errors.New("--leader must not be empty")
		case set["value"]:
			return errors.New("--value is what observers of an election see: it needs --leader")
		}
		return nil
	}
	switch {
	case len(o.leader) > turnstile.MaxKeyLen:
		return fmt.Errorf("--leader is %d bytes long, the limit is %d", len(o.leader), turnstile.MaxKeyLen)
	case set["key"]:
		return errors.New("--key and --leader exclude each other: --leader NAME holds the lock on NAME while leading")
	case len(kinds) > 0:
		return fmt.Errorf("--leader and %s exclude each other: a leader holds the plain lock on its election", kinds[0])
	case len(o.value) > turnstile.MaxLeaderValueLen:
		return fmt.Errorf("--value is %d bytes long, the limit is %d", len(o.value), turnstile.MaxLeaderValueLen)
	case set["value"] && o.value == "":
		return errors.New("--value must not be empty (omit it to announce the host name and process id)")
	}
	for _, c := range []byte(o.value) {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("--value %q contains a control character", o.value)
		}
	}
	o.key = o.leader
	return nil
}

// check rejects settings that cannot work before any connection is made,
// so that a typo never costs a round trip or a wait.
func (o *runOptions) check(waitSet bool) error {
	if err := cli.CheckMetricsAddr(o.metricsAddr); err != nil {
		return err
	}
	switch {
	case o.key == "":
		return errors.New("--key is required and must not be empty")
	case len(o.key) > turnstile.MaxKeyLen:
		return fmt.Errorf("--key is %d bytes long, the limit is %d", len(o.key), turnstile.MaxKeyLen)
	case o.ttl < turnstile.MinTTL:
		return fmt.Errorf("--ttl %v is outside [%v, %v]: the lease is renewed every third of its TTL, and a shorter one would be lost on a busy host before a renewal got back from the store",
			o.ttl, turnstile.MinTTL, turnstile.MaxTTL)
	case o.ttl > turnstile.MaxTTL:
		return fmt.Errorf("--ttl %v is outside [%v, %v]", o.ttl, turnstile.MinTTL, turnstile.MaxTTL)
	case waitSet && o.noWait:
		return errors.New("--wait and --no-wait exclude each other")
	case waitSet && o.wait <= 0:
		return fmt.Errorf("--wait %v must be positive (omit it to wait until the lock is free, or use --no-wait for a single attempt)", o.wait)
	case o.grace < 0:
		return fmt.Errorf("--grace %v must not be negative", o.grace)
	case o.backend == "":
		return errors.New("--backend must not be empty")
	}
	return nil
}

// checkLockDelay checks --lock-delay: in [0, MaxLockDelay], and for the
// plain lock or --leader only (the lock kinds cannot keep it).
func (o *runOptions) checkLockDelay(kinds []string) error {
	switch {
	case o.lockDelay < 0:
		return fmt.Errorf("--lock-delay %v must not be negative", o.lockDelay)
	case o.lockDelay > turnstile.MaxLockDelay:
		return fmt.Errorf("--lock-delay %v is longer than %v: a resource that needs longer to drain a dead holder's writes should check fencing tokens", o.lockDelay, turnstile.MaxLockDelay)
	case o.lockDelay > 0 && len(kinds) > 0:
		return fmt.Errorf("--lock-delay applies to the plain lock and --leader, not to %s", kinds[0])
	}
	return nil
}

// durationFlag is a time.Duration flag whose error message says what a
// duration looks like.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 500ms, 30s or 5m")
	}
	*d = durationFlag(v)
	return nil
}

// runBackendHelp is the help of run's --backend and --backend-file.
func runBackendHelp() string {
	return cli.BackendHelp(17, "a URL of one of the stores compiled in ("+strings.Join(turnstile.Schemes(), ", ")+
		"); mem:// lives inside this one process and excludes nothing across processes: use it only to try turnstile out",
		defaultBackend, "")
}

func runUsage() string {
	var b strings.Builder
	fmt.Fprintf(&b, `Usage: turnstile run [flags] -- COMMAND [ARG...]

Run COMMAND while holding the lock on --key (or while leading the election
--leader names); release the lock when it exits.
While COMMAND runs, the lease is renewed every TTL/3. If it is lost anyway
(the store dropped the key, or no renewal was confirmed within the TTL),
another holder may already be running: COMMAND's processes get SIGTERM,
then SIGKILL after --grace, and turnstile exits 79.

COMMAND runs in its own process group (given the terminal, if turnstile has
it, as a shell does for a job), with turnstile's stdin, stdout, stderr and
environment, except $TURNSTILE_BACKEND (see --pass-backend), plus:
  TURNSTILE_KEY    the locked key
  TURNSTILE_TOKEN  the fencing token, in decimal: greater than the token of
                   every earlier holder of the key. Pass it to the storage
                   COMMAND writes to, so that it can refuse late writes from
                   a holder that lost the lock.
SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to turnstile are passed on to
COMMAND's processes; when COMMAND exits, the lock is released and turnstile
exits with COMMAND's status. Processes COMMAND leaves running in the
background when it ends by itself are not waited for and do not hold the
lock. When COMMAND was stopped instead (lease lost, a signal passed on),
what it leaves behind is stopped too before the lock is released: SIGTERM,
then SIGKILL after --grace.

COMMAND's processes are its process group and, on Linux, every process
descended from it, even one that left the group (setsid, a daemon that
double-forks) or is stopped: the small supervisor process that starts
COMMAND for turnstile finds them. If turnstile itself is killed (SIGKILL,
the OOM killer), nothing renews the lease any more, and the supervisor
kills them all within milliseconds. On other systems only the process
group is reached, and it keeps running after turnstile dies.

Flags:
%s  --key KEY      the lock to hold, e.g. lock:inventory:12345 (required,
                 unless --leader)
  --ttl D        lease TTL: how long the lock outlives a turnstile that
                 crashed or lost the store (default %v)
  --lock-delay D keep the lock for D more after a turnstile that failed
                 (killed, or its lease lost) instead of releasing it, so
                 that a resource that cannot check fencing tokens gets time
                 for its writes still on their way; a clean exit releases
                 at once. Not for ZooKeeper or the lock kinds; at most 1h
                 (default 0: none)
  --wait D       give up with exit 75 if the lock is not acquired within D
                 (default: wait until it is, like flock without -w)
  --no-wait      make a single attempt; exit 75 at once if the lock is held
  --grace D      time between SIGTERM and SIGKILL when COMMAND must stop:
                 from the moment the lease is lost, or, after a signal, from
                 the moment COMMAND exits for the processes it leaves behind
                 (default %v)
  --pass-backend pass the store's URL (password included) on to COMMAND
                 as $TURNSTILE_BACKEND, for a COMMAND that runs turnstile
                 itself. Without it COMMAND gets no $TURNSTILE_BACKEND (nor
                 the demo's TURNSTILE_DEMO_REDIS and TURNSTILE_DEMO_POSTGRES),
                 so that it cannot release or take the store's locks by
                 mistake.
  --metrics-addr HOST:PORT
                 serve Prometheus metrics (acquire latency, outcomes,
                 renewals, lost leases) at http://HOST:PORT/metrics while
                 turnstile runs
Durations are written like 500ms, 30s or 5m.

Lock kinds (one at most; default: the plain lock, held by one at a time):
  --shared       take a read lock: any number of --shared runs hold KEY
                 together, while no --exclusive run holds it
  --exclusive    take the write side of that read-write lock: alone, once
                 the --shared runs inside have finished; new --shared runs
                 wait while it waits (writers go first). The read-write
                 lock on KEY is not the plain lock on KEY: runs that share
                 data through it must all give --shared or --exclusive.
  --semaphore N  hold one of N permits on KEY: up to N runs at once. The
                 store keeps N with the permits: while any is held, a run
                 with another N is refused. Not the plain lock on KEY.
  --fair         wait in a first-come, first-served line for the plain lock
                 on KEY, printing "turnstile: you are N-th in line for KEY"
                 on stderr whenever the place changes (on Redis a plain run
                 may still take a free lock ahead of the line; on etcd and
                 ZooKeeper every run waits in line already).
Every store has --shared and --exclusive; --semaphore every store but
redlock:// (a quorum of per-node semaphores cannot bound the holders);
--fair mem://, redis://, rediss://, etcd:// and zookeeper:// (a store with a
queue in it). On another store a kind is a usage error (64).

Leader election (instead of --key and a lock kind):
  --leader NAME  campaign to lead the election NAME and run COMMAND while
                 leading: the leader holds the plain lock on NAME, so one
                 run leads at a time, and when the leader's COMMAND
                 exits the next is elected without waiting for the TTL.
                 Candidates wait until they lead (or as --wait and
                 --no-wait say). A leader whose lease is lost is stopped
                 as under a lock, exit 79; turnstile restarts nothing: to
                 campaign again, run it again (from a loop or a service
                 manager). COMMAND also gets:
                   TURNSTILE_LEADER  NAME
                   TURNSTILE_TERM    the leader's term: its fencing token
                                     (the same as TURNSTILE_TOKEN), greater
                                     than every earlier leader's
                   TURNSTILE_VALUE   what observers see (--value)
  --value V      what observers of the election see as the leader (the
                 owner id "turnstile status NAME" shows starts with it; the
                 library's Election.Leader and Observe return it): at most
                 %d bytes without control characters (default: the host
                 name and process id)

--ttl means the same on every store: a crashed turnstile's lock lasts --ttl,
plus the store's granularity (etcd counts whole seconds, 2 s at least;
ZooKeeper's session timeout is made --ttl, 2 s at least, unless the URL sets
session_timeout, which must then be at least --ttl).

While the lock is held elsewhere, turnstile retries after random pauses
(exponential backoff with full jitter: below %v at first, doubling up to
%v). If the store fails on the first attempt, turnstile exits 69 at once;
failures later in the wait are retried until the lock is acquired or --wait
expires.

`, runBackendHelp(), turnstile.DefaultTTL, defaultGrace, turnstile.MaxLeaderValueLen,
		turnstile.DefaultBackoffBase, turnstile.DefaultBackoffCap)
	b.WriteString(exitCodeHelp)
	return b.String()
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// Limits of the "turnstile advise" flags: beyond them the load is not one
// a lock service is sized for, or the figure is a typo.
const (
	minAdviseRate        = 0.001
	maxAdviseRate        = 1e9
	maxAdviseHold        = time.Hour
	defaultAdviseHold    = 50 * time.Millisecond
	defaultAdviseMeasure = 2 * time.Second
	maxAdviseMeasure     = time.Minute
)

// The operations "turnstile advise --operation" knows: what the lock
// guards decides whether a lock-free pattern can replace it.
const (
	opGeneric = "generic"
	opStock   = "stock-decrement"
	opPayment = "payment"
	opJob     = "job"
)

var adviseOperations = []string{opGeneric, opStock, opPayment, opJob}

// The stores "turnstile advise --stores" knows, by their canonical name,
// and the other names it accepts for them.
var adviseStoreNames = []string{"redis", "postgres", "mysql", "etcd", "zookeeper", "kafka"}

var adviseStoreAliases = map[string]string{
	"postgresql": "postgres", "pg": "postgres",
	"mariadb": "mysql",
	"zk":      "zookeeper",
	"redlock": "redis", "rediss": "redis", "valkey": "redis",
}

// adviseInput is a parsed and checked "turnstile advise" command line. Its
// JSON form is the "input" object of --json.
type adviseInput struct {
	Rate        float64 `json:"rate"`
	HoldMicros  float64 `json:"hold_us"`
	HotKeyShare float64 `json:"hot_key_share"`
	Safety      string  `json:"safety"`
	Operation   string  `json:"operation"`
	// Stores lists the stores the team runs: nil (JSON null) when
	// --stores was not given, and any store may be deployed; empty for
	// --stores none.
	Stores []string `json:"stores"`

	hold     time.Duration
	backend  string // --backend URL to measure, "" for the documented figures
	from     string // where backend came from, for errors
	duration time.Duration
	json     bool
}

// has reports whether the team runs store, or may deploy it.
func (in *adviseInput) has(store string) bool {
	return in.Stores == nil || slices.Contains(in.Stores, store)
}

func parseAdvise(args []string) (*adviseInput, error) {
	in := &adviseInput{}
	fs := cli.NewFlagSet("advise")
	var rate, share, stores string
	fs.StringVar(&rate, "rate", "", "")
	hold := adviseDuration(defaultAdviseHold)
	fs.Var(&hold, "hold", "")
	fs.StringVar(&share, "hot-key-share", "0", "")
	fs.StringVar(&in.Safety, "safety", "normal", "")
	fs.StringVar(&in.Operation, "operation", "", "")
	fs.StringVar(&stores, "stores", "", "")
	var backend cli.BackendFlags
	backend.Register(fs, "backend")
	duration := adviseDuration(defaultAdviseMeasure)
	fs.Var(&duration, "duration", "")
	fs.BoolVar(&in.json, "json", false, "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (turnstile advise takes flags only)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if !set["rate"] {
		return nil, errors.New("--rate is required: the peak lock acquisitions per second, e.g. --rate 20000 or --rate 100k")
	}
	var err error
	if in.Rate, err = parseAdviseRate(rate); err != nil {
		return nil, fmt.Errorf("--rate %q: %w", rate, err)
	}
	in.hold = time.Duration(hold)
	if in.hold <= 0 || in.hold > maxAdviseHold {
		return nil, fmt.Errorf("--hold %v is outside (0, %v]: the average time a lock is held", in.hold, maxAdviseHold)
	}
	in.HoldMicros = float64(in.hold) / float64(time.Microsecond)
	if in.HotKeyShare, err = parseAdviseShare(share); err != nil {
		return nil, fmt.Errorf("--hot-key-share %q: %w", share, err)
	}
	switch in.Safety {
	case "normal", "money":
	default:
		return nil, fmt.Errorf("--safety %q: want money (a double execution is unacceptable) or normal", in.Safety)
	}
	switch {
	case in.Operation == "":
		in.Operation = opGeneric
	case !slices.Contains(adviseOperations, in.Operation):
		return nil, fmt.Errorf("--operation %q: want one of %s", in.Operation, strings.Join(adviseOperations, ", "))
	}
	if in.Operation == opPayment && !set["safety"] {
		in.Safety = "money" // a payment that runs twice charges twice
	}
	if set["stores"] {
		if in.Stores, err = parseAdviseStores(stores); err != nil {
			return nil, fmt.Errorf("--stores %q: %w", stores, err)
		}
	}
	// Only an explicit --backend or --backend-file measures: a
	// $TURNSTILE_BACKEND set for "turnstile run" must not load a server.
	url, from, err := backend.Resolve(func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	in.backend, in.from = url, from
	in.duration = time.Duration(duration)
	if in.duration <= 0 || in.duration > maxAdviseMeasure {
		return nil, fmt.Errorf("--duration %v is outside (0, %v]", in.duration, maxAdviseMeasure)
	}
	if set["duration"] && in.backend == "" {
		return nil, errors.New("--duration is how long --backend is measured: give --backend too")
	}
	return in, nil
}

// rateHint is how --rate is written.
const rateHint = "want acquisitions per second, such as 800, 20000, 20_000, 1,500, 100k or 1.5M"

// parseAdviseRate reads --rate: acquisitions per second as a number of
// parseAdviseNumber's, with an optional k (thousand) or M (million; an m
// could be read as milli) and an optional "/s"; at least minAdviseRate
// and at most maxAdviseRate.
func parseAdviseRate(s string) (float64, error) {
	num := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	scale := 1.0
	switch {
	case strings.HasSuffix(num, "k"), strings.HasSuffix(num, "K"):
		scale, num = 1e3, num[:len(num)-1]
	case strings.HasSuffix(num, "M"):
		scale, num = 1e6, num[:len(num)-1]
	}
	v, err := parseAdviseNumber(num)
	if err != nil {
		return 0, errors.New(rateHint)
	}
	if v *= scale; v < minAdviseRate || v > maxAdviseRate {
		return 0, fmt.Errorf("want a rate of at least %g and at most %.0f per second", minAdviseRate, float64(maxAdviseRate))
	}
	return v, nil
}

// parseAdviseShare reads --hot-key-share: a fraction in [0, 1], or a
// percentage such as 5%, as a number of parseAdviseNumber's.
func parseAdviseShare(s string) (float64, error) {
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := parseAdviseNumber(num)
	if err != nil {
		return 0, errors.New("want the fraction of all acquisitions that go to the hottest key: 0 to 1 (0.05) or a percentage (5%)")
	}
	if pct {
		v /= 100
	}
	if v > 1 {
		return 0, errors.New("the share of the hottest key is between 0 and 1 (0% and 100%)")
	}
	return v, nil
}

// parseAdviseStores reads --stores: a comma-separated list of the stores
// the team runs, canonical names sorted and without repeats.
func parseAdviseStores(s string) ([]string, error) {
	out := []string{}
	for name := range strings.SplitSeq(s, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if a, ok := adviseStoreAliases[name]; ok {
			name = a
		}
		switch {
		case name == "" && strings.TrimSpace(s) == "":
			return nil, fmt.Errorf("name the stores you run, e.g. redis,postgres (one or more of %s)", strings.Join(adviseStoreNames, ", "))
		case name == "":
			return nil, errors.New("an empty name between commas")
		case name == "none":
			continue
		case !slices.Contains(adviseStoreNames, name):
			return nil, fmt.Errorf("unknown store %q: want one or more of %s, comma-separated (or none)", name, strings.Join(adviseStoreNames, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func adviseUsage() string {
	var b strings.Builder
	fmt.Fprintf(&b, `Usage: turnstile advise --rate N [flags]

Recommend how to make "exactly one executor" hold for a load: which row of
the load table in docs/backends.md fits and why, the runner-up and why not,
the deployment phase (1-4) to run as the exact URL and options, how many
store cores and nodes the load needs, and the alerts of
deploy/prometheus/alerts.yml to deploy.

The capacity comes from the documented cost of an acquisition (a lock and
its release) on the server, or, with --backend, from a short measurement of
your own server with the cells of "turnstile bench" (one worker for the
round trip, 64 for the server's CPU per acquisition).

Flags:
  --rate N          peak lock acquisitions per second (required), e.g.
                    800, 20000, 20_000, 1,500, 100k, 1.5M
  --hold D          average time a lock is held (default %v, at most %v)
  --hot-key-share F fraction of all acquisitions that go to the hottest
                    key: 0 to 1, or a percentage such as 5%% (default 0:
                    keys spread out)
  --safety S        money: a double execution is unacceptable (fencing
                    mandatory, a consensus store or Redlock, lock-free
                    where the operation allows); normal (default; money
                    for --operation payment)
  --operation OP    what the lock guards: generic (default),
                    stock-decrement, payment, job
  --stores LIST     the stores your team already runs, comma-separated:
                    %s, or none (default: any may be deployed)
`, defaultAdviseHold, maxAdviseHold, strings.Join(adviseStoreNames, ","))
	cli.HelpItem(&b, 20, "--backend URL", "measure this server instead of using the documented figures: redis://, rediss:// or redlock:// (the Redlock's nodes and one of them alone), as for turnstile bench; it loads the server with up to 64 lock workers for twice --duration. Only this flag or --backend-file measures: $"+cli.BackendEnv+" does not. Output and errors show the URL with its password masked.")
	cli.HelpItem(&b, 20, "--backend-file FILE", "read the URL to measure from FILE, its one line")
	fmt.Fprintf(&b, `  --duration D      how long each measured cell runs (default %v, at most
                    %v); only with --backend
  --json            print the advice as one JSON object (fields in
                    docs/cli.md) instead of the table
Numbers may group their digits with Go-style underscores, one between any
two digits (20_000, 1_0, 0.000_5, also in durations: 1_500ms), or with
commas between groups of three (1,500); not both, and no sign or exponent.
Durations are written like 200ms, 3s or 1m.

Examples:
  turnstile advise --rate 800 --stores postgres
  turnstile advise --rate 30k --hold 20ms --safety money --stores redis,postgres,kafka
  turnstile advise --rate 200k --operation stock-decrement --hot-key-share 40%%
  turnstile advise --rate 50k --backend redis://10.0.0.5:6379 --json

Exit status:
  0      the advice was printed
  64     usage error: a missing or bad flag value
  69     the --backend server could not be reached, measured or read
         (INFO refused)
  128+N  interrupted by signal N while measuring
`, defaultAdviseMeasure, maxAdviseMeasure)
	return b.String()
}

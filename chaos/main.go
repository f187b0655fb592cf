// Command chaos runs turnstile's fault-injection suite: real servers on
// loopback in the configurations users run, several workload processes
// taking one lock and writing to a fenced register with their lease's
// token (and to an unfenced control register), faults injected again and
// again, and checks over everything the workers saw.
//
//	go run ./chaos --store etcd --fault partition-majority --duration 60s
//	go run ./chaos --all                 every store × every fault
//	go run ./chaos --quick               every store (but redis-aof-*), a few faults, a few seconds each
//	go run ./chaos --all --doc docs/guarantees.md --json results.jsonl
//
// The checks, on every cell: tokens strictly increase in the order
// critical sections begin; no acknowledged increment of the fenced
// register is lost; the fenced register's history is linearizable
// (porcupine); a lock is granted again within a bound after each fault
// heals. The control register is incremented the same way without the
// fence: its lost updates show that the fault broke mutual exclusion, so
// that a clean fenced register means the fence held, not that nothing
// happened.
//
// Exit status: 0 when every fenced register was safe and every store
// granted again after each fault; 1 when a register was unsafe, its check
// undecided, or a store did not recover in time; 2 when a cell could not
// run; 64 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if cfg, ok := os.LookupEnv(workerEnv); ok {
		os.Exit(runWorker(cfg))
	}
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// quickFaults are the faults of --quick: one that only the fence can
// survive, a server crash, and the lost grant of a failover.
var quickFaults = []string{"holder-pause", "member-kill", "failover"}

// options are the command line, parsed.
type options struct {
	settings
	jsonPath string
	docPath  string
	quick    bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	storeList := fs.String("store", "", "store configurations, comma-separated: "+strings.Join(storeOrder, ", "))
	faultList := fs.String("fault", "", "faults, comma-separated: "+strings.Join(faultOrder, ", "))
	all := fs.Bool("all", false, "every store and every fault (the flags --store and --fault narrow it)")
	fs.BoolVar(&o.quick, "quick", false, "every store but redis-aof-*, the faults "+strings.Join(quickFaults, ", ")+", 4 s each")
	fs.DurationVar(&o.Duration, "duration", 20*time.Second, "how long faults are injected in each store × fault cell")
	fs.IntVar(&o.Workers, "workers", 3, "workload processes per cell")
	fs.IntVar(&o.Keys, "keys", 1, "keys each worker locks side by side (faults aim at the first key's holder; every key is checked)")
	fs.DurationVar(&o.TTL, "ttl", time.Second, "the workers' lease TTL")
	fs.DurationVar(&o.Hold, "hold", 2*time.Millisecond, "the pause in each critical section between reading and writing the registers")
	fs.StringVar(&o.Dir, "dir", "", "where the servers keep their files (default: a new temporary directory, removed after)")
	fs.StringVar(&o.History, "history", "", "write every event of each cell to DIR/<store>-<fault>.jsonl, and what each server logged meanwhile to DIR/<store>-<fault>.<member>.log, to study a verdict")
	fs.StringVar(&o.jsonPath, "json", "", "write one JSON line per cell to this file")
	fs.StringVar(&o.docPath, "doc", "", "write the table into this markdown file, between its chaos markers (docs/guarantees.md)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.Stores, o.Faults = storeOrder, faultOrder
	switch {
	case o.quick:
		o.Stores, o.Faults = quickStores(), quickFaults
		if !isSet(fs, "duration") {
			o.Duration = 4 * time.Second
		}
	case *all:
	case *storeList == "" || *faultList == "":
		return o, errors.New("name a --store and a --fault, or give --all or --quick")
	}
	var err error
	if *storeList != "" {
		if o.Stores, err = names(*storeList, storeOrder, "store"); err != nil {
			return o, err
		}
	}
	if *faultList != "" {
		if o.Faults, err = names(*faultList, faultOrder, "fault"); err != nil {
			return o, err
		}
	}
	switch {
	case o.Duration <= 0:
		return o, errors.New("--duration must be positive")
	case o.Workers < 2 || o.Workers > 64:
		return o, errors.New("--workers must be between 2 and 64: mutual exclusion needs contenders")
	case o.Keys < 1 || o.Keys > 64:
		return o, errors.New("--keys must be between 1 and 64")
	case o.TTL < 100*time.Millisecond || o.TTL > time.Minute:
		return o, errors.New("--ttl must be between 100ms and 1m")
	case o.Hold < 0 || o.Hold >= o.TTL:
		return o, errors.New("--hold must be at least 0 and shorter than the TTL")
	}
	return o, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// names splits a comma-separated list and checks each name.
func names(list string, known []string, what string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown %s %q: one of %s", what, n, strings.Join(known, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func cli(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 64
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "turnstile-chaos-")
		if err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
			return 2
		}
		defer os.RemoveAll(dir)
		o.Dir = dir
	}
	o.Log = stderr
	var jsonOut io.Writer = io.Discard
	if o.jsonPath != "" {
		f, err := os.Create(o.jsonPath)
		if err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
			return 2
		}
		defer f.Close()
		jsonOut = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started, rev := time.Now(), commit() // the code that runs is the code at the start
	var cells []cell
	err = run(ctx, o.settings, func(c cell) {
		cells = append(cells, c)
		fmt.Fprintln(stderr, "   ", summary(c))
		b, _ := json.Marshal(c)
		_, _ = jsonOut.Write(append(b, '\n'))
	})
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	rep := report{Cells: cells, Command: commandLine(args), Commit: rev, Wall: time.Since(started), Settings: o.settings}
	fmt.Fprint(stdout, rep.markdown())
	if o.docPath != "" {
		if err := rep.writeInto(o.docPath); err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
			return 2
		}
	}
	return rep.status()
}

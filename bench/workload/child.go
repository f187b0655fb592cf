package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

// childEnv carries a child process's orders; its presence makes
// ServeChild run the child instead of the program.
const childEnv = "TURNSTILE_BENCH_CHILD"

// childSpec is what a child process is told to do.
type childSpec struct {
	Library  string        `json:"library"`
	Addrs    []string      `json:"addrs"`
	Workload Workload      `json:"workload"` // Concurrency, Clients: this child's
	Prefix   string        `json:"prefix"`
	Duration time.Duration `json:"duration"`
}

// ServeChild runs this process as a worker process of a multi-process
// cell if it was started as one (Run re-executes the running binary with
// its orders in the environment), and then reports true: the caller must
// exit at once. Otherwise it reports false. Call it first thing in main
// and in TestMain, with every library the program's cells use.
//
// The protocol on the child's standard streams: the child opens its
// library and warms it up, writes "ready", waits for a line on its
// standard input, runs its workers for the cell's duration and writes
// its tally as one JSON line.
func ServeChild(libs []Library) bool {
	spec, ok := os.LookupEnv(childEnv)
	if !ok {
		return false
	}
	out := json.NewEncoder(os.Stdout)
	if err := serveChild(spec, libs, os.Stdin, os.Stdout); err != nil {
		_ = out.Encode(tally{FirstErr: err.Error(), Errors: 1})
	}
	return true
}

func serveChild(raw string, libs []Library, in io.Reader, out io.Writer) error {
	var s childSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return fmt.Errorf("child orders: %w", err)
	}
	var lib *Library
	for i := range libs {
		if libs[i].Name == s.Library {
			lib = &libs[i]
		}
	}
	if lib == nil {
		return fmt.Errorf("%w: child asked for unknown library %q", ErrUsage, s.Library)
	}
	ctx := context.Background()
	lks, err := openLockers(ctx, lib.Name, lib.Open, s.Addrs, s.Workload.Concurrency, s.Workload.Clients)
	if err != nil {
		return err
	}
	defer closeLockers(lks)
	if err := warmUp(ctx, lks, s.Prefix+"child:"+fmt.Sprint(os.Getpid())+":", s.Workload.Concurrency); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := fmt.Fprintln(out, "ready"); err != nil {
		return err
	}
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	t := drive(ctx, lks, s.Workload, s.Prefix, s.Workload.Concurrency, s.Duration)
	return json.NewEncoder(out).Encode(t)
}

// child is a running worker process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// runChildren runs c's workers in c.Workload.Processes child processes.
func runChildren(ctx context.Context, c Cell, counter Stats, prefix string) (Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return Result{}, fmt.Errorf("workload: %s: find this program to re-execute: %w", c.Workload.ID(), err)
	}
	per := c.Workload
	per.Concurrency /= per.Processes
	per.Clients /= per.Processes // this child's share; 0: one Locker
	per.Processes = 0
	spec, err := json.Marshal(childSpec{Library: c.Library.Name, Addrs: c.Addrs, Workload: per, Prefix: prefix, Duration: c.Duration})
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Duration+2*time.Minute)
	defer cancel()
	var kids []*child
	defer func() {
		for _, k := range kids {
			_ = k.stdin.Close()
			_ = k.cmd.Wait()
		}
	}()
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("workload: %s: %s child process: %w", c.Workload.ID(), c.Library.Name, err)
	}
	for range c.Workload.Processes {
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		proc.DieWithParent(cmd)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return fail(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return fail(err)
		}
		if err := cmd.Start(); err != nil {
			return fail(err)
		}
		kids = append(kids, &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)})
	}
	for _, k := range kids {
		line, err := k.out.ReadString('\n')
		if err != nil {
			return fail(fmt.Errorf("no ready line: %w", err))
		}
		if strings.TrimSpace(line) != "ready" {
			return fail(childError(line))
		}
	}
	before, err := counter.Read(ctx)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	for _, k := range kids {
		if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
			return fail(err)
		}
	}
	tallies := make([]tally, len(kids))
	errs := make([]error, len(kids))
	var wg sync.WaitGroup
	for i, k := range kids {
		wg.Go(func() {
			line, err := k.out.ReadString('\n')
			if err == nil {
				err = json.Unmarshal([]byte(line), &tallies[i])
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	after, err := readAfter(ctx, counter)
	if err != nil {
		return Result{}, err
	}
	t := tally{Start: start.UnixNano()}
	for _, ct := range tallies {
		ct.Start = 0 // the workers started when told to: at start
		t.merge(ct)
	}
	return newResult(c, t, after.Sub(before)), nil
}

// childError turns what a child wrote instead of "ready" into an error.
func childError(line string) error {
	var t tally
	if json.Unmarshal([]byte(line), &t) == nil && t.FirstErr != "" {
		return errors.New(t.FirstErr)
	}
	return fmt.Errorf("unexpected output %q", strings.TrimSpace(line))
}

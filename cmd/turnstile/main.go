// Command turnstile is the command-line face of the turnstile lock
// toolkit: it runs commands while holding a distributed lock.
//
//	turnstile run --key lock:report:daily -- ./make-report.sh
//
// Run "turnstile help" for the list of commands and "turnstile help
// COMMAND" for one command's flags and exit codes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/demo"
)

// A command is one subcommand. Each lives in its own file and is
// callable in-process, so that tests can drive it without building the
// binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands in the order help shows them. Adding one
// is a file with its function plus a line here.
var commands = []command{
	{"run", "run a command while holding a lock", runCmd},
	{"status", "show whether a lock is held, by whom, and its last fencing token", statusCmd},
	{"ls", "list the locks held now", lsCmd},
	{"unlock", "remove a stuck lock by force, raising its fence first", unlockCmd},
	{"serve", "serve the lock service over a store: gRPC, gRPC-Web, JSON over HTTP", serveCmd},
	{"dashboard", "serve the operator page of a store's locks on this machine, in a browser", dashboardCmd},
	{"demo", "run the incidents turnstile prevents, without and with it", demo.Main},
	{"bench", "measure turnstile's locks on your Redis: throughput, latency, commands", benchCmd},
	{"advise", "recommend a lock design for a load: store, phase preset, capacity, alerts", adviseCmd},
	{"version", "print the version, the commit and the stores compiled in", versionCmd},
	{"completion", "print a bash, zsh or fish script that completes turnstile's commands", completionCmd},
}

func main() {
	os.Exit(dispatch(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch picks the subcommand named by args[0] and returns the exit
// code of the process.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	name := args[0]
	if name == "--version" || name == "-version" {
		return versionCmd(ctx, args[1:], stdout, stderr)
	}
	if isHelp(name) {
		if len(args) > 1 {
			if c, ok := lookup(args[1]); ok {
				return c.run(ctx, []string{"-h"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "turnstile: unknown command %s\n\n", cli.QuoteArg(args[1]))
			printUsage(stderr)
			return exitUsage
		}
		printUsage(stdout)
		return exitOK
	}
	c, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "turnstile: unknown command %s\n\n", cli.QuoteArg(name))
		printUsage(stderr)
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, "turnstile makes exactly one process at a time do the work guarded by a lock.\n\n")
	fmt.Fprint(w, "Usage: turnstile COMMAND [flags] [args]\n\nCommands:\n")
	width := len("help")
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-*s show this list, or \"turnstile help COMMAND\" for one command\n", width, "help")
	fmt.Fprint(w, "\n\"turnstile --version\" is \"turnstile version\".\n")
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/bench/render"
	"github.com/turnstilelock/turnstile/bench/workload"
)

// nativeStore is a store whose turnstile backend the native-recipe cells
// (workload.NativeRecipe) set beside the store's own lock recipe as its
// users run it, on one server the run starts itself.
type nativeStore struct {
	// name is the store's --store value.
	name string
	// recipe names the store's own recipe in the report's title.
	recipe string
	// libraries are turnstile on the store and the recipe.
	libraries func() []workload.Library
	// start runs the store's server with its files under dir.
	start func(dir string) (nativeServer, error)
}

// nativeServer is the server a native-recipe run started.
type nativeServer struct {
	// addr is the server's host:port, the cells' one address.
	addr string
	// stats reads what the server did during a cell.
	stats func(addrs []string) (workload.Stats, error)
	// notes say what the server is and how it runs, for the report.
	notes []string
	// stop ends the server and removes its files.
	stop func()
}

// nativeStores are the stores --store takes besides redis, in the order
// the flag's help lists them.
var nativeStores = []nativeStore{etcdStore, postgresStore, mysqlStore, zookeeperStore}

// nativeStoreNamed is the native store --store name runs, if any.
func nativeStoreNamed(name string) (nativeStore, bool) {
	for _, s := range nativeStores {
		if s.name == name {
			return s, true
		}
	}
	return nativeStore{}, false
}

// nativeLibraries are turnstile and the recipe of every native store,
// for a child process that may be asked for any of them.
func nativeLibraries() []workload.Library {
	var libs []workload.Library
	for _, s := range nativeStores {
		for _, l := range s.libraries() {
			if l.Name != "turnstile" { // the Redis one answers to that name
				libs = append(libs, l)
			}
		}
	}
	return libs
}

// benchmarkNative runs the native-recipe workloads of cfg.store on a
// server it starts itself, and writes the outputs as benchmark does.
func benchmarkNative(ctx context.Context, cfg config, stdout, log io.Writer) error {
	store, ok := nativeStoreNamed(cfg.store)
	if !ok {
		return fmt.Errorf("--store %q: %w", cfg.store, errUnknownStore)
	}
	rep, err := runNative(ctx, cfg, store, log)
	if err != nil {
		return err
	}
	return write(cfg.out, rep, stdout, log)
}

// runNative starts store's server under a temporary directory, runs the
// native-recipe cells of cfg through turnstile and the recipe, stops the
// server and returns the report. A cell that fails is reported in the
// report's problems and the run goes on.
func runNative(ctx context.Context, cfg config, store nativeStore, log io.Writer) (render.Report, error) {
	dir, err := os.MkdirTemp("", "turnstile-bench-"+store.name+"-")
	if err != nil {
		return render.Report{}, err
	}
	defer os.RemoveAll(dir)
	srv, err := store.start(dir)
	if err != nil {
		return render.Report{}, fmt.Errorf("start %s: %w", store.name, err)
	}
	defer srv.stop()
	env := environment{
		single: srv.addr,
		nodes:  []string{srv.addr},
		flush:  func() error { return nil }, // every cell has keys of its own
		stats:  srv.stats,
	}
	libs := store.libraries()
	rep := render.Report{Title: "turnstile/" + store.name + " against " + store.recipe, Started: time.Now()}
	problem := func(err error) {
		fmt.Fprintln(log, "bench:", err)
		rep.Problems = append(rep.Problems, err.Error())
	}
	runWorkloads(ctx, cfg, cfg.workloads(), libs, env, &rep, log, problem)
	rep.Notes = append(rep.Notes, machineNotes(cfg, srv.notes[0], libs)...)
	rep.Notes = append(rep.Notes, srv.notes[1:]...)
	if cfg.note != "" {
		rep.Notes = append(rep.Notes, cfg.note)
	}
	return rep, ctx.Err()
}

// processServer is the server at addr, of process pid, whose cells count
// the CPU time of its processes: notes say what it is, and processCPUNote
// follows them. stop ends it.
func processServer(addr string, pid int, stop func(), notes ...string) nativeServer {
	return nativeServer{addr: addr, stats: workload.ProcessCPU(pid), notes: append(notes, processCPUNote), stop: stop}
}

// processCPUNote says what a store's cells count whose stats are
// workload.ProcessCPU.
const processCPUNote = "Server CPU is the user and system time of the server's process and of the processes it started, from /proc; the cells count no server commands on this store."

// perAcq formats per-acquisition counts, the largest first.
func perAcq(m map[string]float64) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return m[names[i]] > m[names[j]] })
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, " %s %.2f", n, m[n])
	}
	return strings.TrimSpace(b.String())
}

// nativeIDs lists the native-recipe workloads' ids.
func nativeIDs() string {
	var s []string
	for _, w := range workload.NativeRecipe() {
		s = append(s, w.ID())
	}
	return strings.Join(s, ", ")
}

// errUnknownStore is a --store that names no store bench runs.
var errUnknownStore = errors.New("no such store")

// storeNames are the values --store takes.
func storeNames() []string {
	names := []string{"redis"}
	for _, s := range nativeStores {
		names = append(names, s.name)
	}
	return names
}

// storeHelp describes the native stores for --store's help.
func storeHelp() string {
	var b strings.Builder
	for _, s := range nativeStores {
		fmt.Fprintf(&b, "%s: turnstile/%s against %s; ", s.name, s.name, s.recipe)
	}
	return b.String() + "each on one server the run starts (workloads: " + nativeIDs() + ")"
}

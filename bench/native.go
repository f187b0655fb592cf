package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/render"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
)

// nativeLibraries are turnstile on etcd and etcd's own recipe.
func nativeLibraries() []workload.Library {
	return []workload.Library{workload.TurnstileEtcd(), peers.EtcdMutex()}
}

// benchmarkEtcd runs the native-recipe workloads on a single-member etcd
// it starts itself, with its data directory on disk (under the system's
// temporary directory) so that every write of its log is fsynced as in
// production, and writes the outputs as benchmark does.
func benchmarkEtcd(ctx context.Context, cfg config, stdout, log io.Writer) error {
	if !etcdproc.Available() {
		return etcdproc.ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "turnstile-bench-etcd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := etcdproc.Start(dir)
	if err != nil {
		return err
	}
	defer srv.Kill()
	env := environment{
		single: srv.Addr(),
		nodes:  []string{srv.Addr()},
		flush:  func() error { return nil }, // every cell has keys of its own
		stats:  workload.EtcdStats,
	}
	rep := render.Report{Title: "turnstile/etcd against etcd's concurrency.Mutex", Started: time.Now()}
	problem := func(err error) {
		fmt.Fprintln(log, "bench:", err)
		rep.Problems = append(rep.Problems, err.Error())
	}
	runWorkloads(ctx, cfg, cfg.workloads(), nativeLibraries(), env, &rep, log, problem)
	rep.Notes = append(rep.Notes, etcdNotes(cfg, dir)...)
	if err := ctx.Err(); err != nil {
		return err
	}
	return write(cfg.out, rep, stdout, log)
}

func etcdNotes(cfg config, dir string) []string {
	notes := machineNotes(cfg, "-", nativeLibraries())
	notes[0] = strings.Replace(notes[0], "redis-server - on loopback", "a single-member etcd on loopback, its data directory on disk ("+dir+", fsync on)", 1)
	return append(notes, "On etcd, server commands are the gRPC messages the member received (a lease renewal or a watch counts one each); writes are the entries committed to its log, fsyncs those of its WAL.")
}

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

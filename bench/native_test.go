package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/bench/render"
)

// TestNativeStores runs every native store's cells end to end, short:
// the run starts the store's server itself, runs turnstile and the
// store's own recipe through the four native-recipe workloads, and the
// report sets turnstile against the recipe in each.
func TestNativeStores(t *testing.T) {
	recipes := map[string]string{"etcd": "etcd-mutex", "postgres": "pg-advisory", "mysql": "mysql-get-lock", "zookeeper": "zk-lock"}
	for _, store := range nativeStores {
		t.Run(store.name, func(t *testing.T) {
			recipe, ok := recipes[store.name]
			if !ok {
				t.Fatalf("no recipe known for store %s", store.name)
			}
			// etcd's data directory goes to memory where the machine
			// has it: this checks the run end to end, not the disk, and
			// a loaded machine's disk stalled etcd's fsyncs past its 7 s
			// request timeout (the recipe's calls failed with
			// "etcdserver: request timed out"). The other stores' test
			// servers do not wait for the disk.
			if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && store.name == "etcd" {
				shm, err := os.MkdirTemp("/dev/shm", "turnstile-bench-test-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(shm) })
				t.Setenv("TMPDIR", shm)
			}
			out := t.TempDir()
			cfg, err := parseFlags([]string{"--store", store.name, "--duration", "200ms", "--out", out}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var log bytes.Buffer
			rep, err := runNative(ctx, cfg, store, &log)
			t.Logf("progress:\n%s", log.String())
			if err != nil {
				t.Fatal(err)
			}
			checkNativeReport(t, rep, store.name, recipe)
			var stdout bytes.Buffer
			if err := write(cfg.out, rep, &stdout, io.Discard); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"turnstile", recipe, "against the fastest peer"} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, stdout.String())
				}
			}
			if _, err := os.Stat(filepath.Join(out, "results.jsonl")); err != nil {
				t.Error(err)
			}
		})
	}
}

// checkNativeReport checks that every native-recipe workload ran through
// turnstile and recipe, acquired locks without errors, and was compared.
func checkNativeReport(t *testing.T, rep render.Report, store, recipe string) {
	t.Helper()
	ran := map[string]bool{}
	var cpu float64
	for _, c := range rep.Cells {
		ran[c.ID+" "+c.Library] = true
		if c.Acquisitions == 0 || c.PerSecond <= 0 || c.P50Micros <= 0 || c.P99Micros < c.P50Micros {
			t.Errorf("%s %s: no acquisitions or bad percentiles: %+v", c.ID, c.Library, c)
		}
		switch {
		case c.Errors == 0:
		case c.Library == recipe:
			// The recipe's own calls failing on a loaded machine (etcd
			// timing a request out while the race detector and other
			// modules' tests share its two cores) are the recipe's, not
			// the run's; it still has to acquire.
			t.Logf("%s %s: %d errors, the first: %s", c.ID, c.Library, c.Errors, c.Error)
		case storeTimedOut(c.Error):
			// The same for turnstile's calls when what failed first is
			// the store's own request timing out in the store.
			t.Logf("%s %s: %d errors, the first the store's own timeout: %s", c.ID, c.Library, c.Errors, c.Error)
		default:
			t.Errorf("%s %s: %d errors, the first: %s", c.ID, c.Library, c.Errors, c.Error)
		}
		cpu += c.ServerCPUMicrosPerAcq
	}
	for _, id := range []string{"uncontended/c=1", "uncontended/c=16", "uncontended/c=64", "contended-1/c=64"} {
		for _, lib := range []string{"turnstile", recipe} {
			if !ran[id+" "+lib] {
				t.Errorf("%s did not run through %s; ran %v", id, lib, ran)
			}
		}
	}
	if cpu <= 0 {
		t.Errorf("no server CPU time in any cell")
	}
	cs := render.Compare(rep.Cells)
	if len(cs) != 4 {
		t.Errorf("%d comparisons, want 4: %+v", len(cs), cs)
	}
	for _, c := range cs {
		if c.BestPeer != recipe || c.Ratio <= 0 {
			t.Errorf("%s: turnstile against %s, ratio %v; want against %s", c.ID, c.BestPeer, c.Ratio, recipe)
		}
	}
	for _, p := range rep.Problems {
		if (strings.Contains(p, " "+recipe+": ") || storeTimedOut(p)) && strings.Contains(p, " errors, the first: ") {
			continue // the recipe's errors, or the store's timeouts, logged above
		}
		t.Errorf("problem: %s", p)
	}
	if len(rep.Notes) < 4 {
		t.Errorf("notes: %q", rep.Notes)
	}
}

// storeTimedOut reports whether msg is etcd's server timing a request
// out (its proposal not applied within its request timeout): the store's
// own failure on a loaded machine, whoever called it.
func storeTimedOut(msg string) bool {
	return strings.Contains(msg, "etcdserver: request timed out")
}

// TestStoreFlag: --store takes every native store and refuses any other
// name with the list of those it takes.
func TestStoreFlag(t *testing.T) {
	for _, name := range storeNames() {
		cfg, err := parseFlags([]string{"--store", name}, io.Discard)
		if err != nil {
			t.Errorf("--store %s: %v", name, err)
			continue
		}
		if name != "redis" && len(cfg.workloads()) != 4 {
			t.Errorf("--store %s: %d workloads, want the 4 native-recipe ones", name, len(cfg.workloads()))
		}
	}
	_, err := parseFlags([]string{"--store", "consul"}, io.Discard)
	if !errors.Is(err, errUnknownStore) {
		t.Fatalf("--store consul: %v, want errUnknownStore", err)
	}
	for _, want := range []string{`"consul"`, "redis, etcd, postgres, mysql, zookeeper"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("--store consul: %q lacks %q", err, want)
		}
	}
	if err := benchmarkNative(context.Background(), config{store: "consul"}, io.Discard, io.Discard); !errors.Is(err, errUnknownStore) {
		t.Errorf("benchmarkNative of an unknown store: %v, want errUnknownStore", err)
	}
}

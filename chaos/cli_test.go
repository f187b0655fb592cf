package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFlagsRefused: bad command lines exit 64 with a message naming the
// problem, before any server starts.
func TestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "name a --store and a --fault"},
		{[]string{"--store", "redis"}, "name a --store and a --fault"},
		{[]string{"--store", "oracle", "--fault", "reset"}, `unknown store "oracle"`},
		{[]string{"--store", "redis", "--fault", "meteor"}, `unknown fault "meteor"`},
		{[]string{"--all", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"--all", "--workers", "1"}, "--workers must be between 2 and 64"},
		{[]string{"--all", "--keys", "0"}, "--keys must be between 1 and 64"},
		{[]string{"--all", "--ttl", "5ms"}, "--ttl must be between"},
		{[]string{"--all", "--hold", "2s"}, "--hold must be"},
		{[]string{"--all", "extra"}, `unexpected argument "extra"`},
		{[]string{"--all", "--duration", "soon"}, "invalid value"},
	} {
		var out, errOut bytes.Buffer
		if code := cli(tc.args, &out, &errOut); code != 64 {
			t.Errorf("%q: exit %d, want 64", tc.args, code)
		}
		if !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: stderr %q does not say %q", tc.args, errOut.String(), tc.want)
		}
	}
}

// TestFlagsSelect: --quick, --all and the lists pick the cells.
func TestFlagsSelect(t *testing.T) {
	o, err := parseFlags([]string{"--quick", "--store", "redis,etcd,redis"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Stores, ",") != "redis,etcd" || strings.Join(o.Faults, ",") != strings.Join(quickFaults, ",") || o.Duration.Seconds() != 4 {
		t.Fatalf("--quick --store redis,etcd,redis: %+v", o.settings)
	}
	o, err = parseFlags([]string{"--quick"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Stores) != len(storeOrder)-len(fullOnly) || slices.ContainsFunc(o.Stores, func(n string) bool { return fullOnly[n] }) {
		t.Fatalf("--quick runs %v, want every store but %v", o.Stores, fullOnly)
	}
	o, err = parseFlags([]string{"--all", "--fault", "reset"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Stores) != len(storeOrder) || strings.Join(o.Faults, ",") != "reset" {
		t.Fatalf("--all --fault reset: %+v", o.settings)
	}
	for _, name := range storeOrder {
		if _, ok := stores()[name]; !ok {
			t.Errorf("store %q in the order but not defined", name)
		}
	}
	for _, name := range faultOrder {
		if f, ok := faults()[name]; !ok || f.length == nil || f.desc == "" {
			t.Errorf("fault %q in the order but not (fully) defined", name)
		}
	}
}

// TestWriteInto: the table replaces what lies between the markers and
// nothing else; a file without them is refused with the lines to add.
func TestWriteInto(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.md")
	before := "# Title\n\nintro\n\n" + docBegin + "\nold table\n" + docEnd + "\n\n## After\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	r := report{Cells: []cell{{Store: "redis", Config: "one", Fault: "reset", Verdict: verdict{tally: tally{Sections: 5}, Linearizable: "ok"}}}, Command: "go run ./chaos", Commit: "abc"}
	if err := r.writeInto(path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	s := string(got)
	if strings.Contains(s, "old table") || !strings.HasPrefix(s, "# Title\n\nintro\n\n"+docBegin) || !strings.HasSuffix(s, docEnd+"\n\n## After\n") ||
		!strings.Contains(s, "| reset | 5 | 0 |") {
		t.Fatalf("after writeInto:\n%s", s)
	}
	if err := os.WriteFile(path, []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.writeInto(path); err == nil || !strings.Contains(err.Error(), docBegin) {
		t.Fatalf("no markers: %v", err)
	}
}

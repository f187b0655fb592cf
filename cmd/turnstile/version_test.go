package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile"
)

// TestVersion: "version" and "--version" print the module version, the
// Go release and every store scheme compiled in; --json prints the same
// as one object.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), args, &stdout, &stderr); code != exitOK {
			t.Fatalf("%q: exit code %d; stderr:\n%s", args, code, stderr.String())
		}
		out := stdout.String()
		for _, want := range []string{"turnstile ", "revision ", "go       go1.", "stores   "} {
			if !strings.Contains(out, want) {
				t.Errorf("%q does not print %q:\n%s", args, want, out)
			}
		}
		for _, s := range []string{"etcd", "fallback", "mem", "mysql", "postgres", "redis", "rediss", "redlock", "zookeeper"} {
			if !strings.Contains(out, s) {
				t.Errorf("%q does not list the %s store:\n%s", args, s, out)
			}
		}
	}

	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"version", "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("version --json: exit code %d; stderr:\n%s", code, stderr.String())
	}
	var bi buildInfo
	if err := json.Unmarshal(stdout.Bytes(), &bi); err != nil {
		t.Fatalf("version --json printed %q: %v", stdout.String(), err)
	}
	if bi.Version == "" || !strings.HasPrefix(bi.Go, "go") || !slices.Equal(bi.Schemes, turnstile.Schemes()) {
		t.Fatalf("version --json: %+v", bi)
	}
}

// TestVersionOfBinary: the built binary knows its module version: a
// binary built in a checkout is "(devel)" without VCS stamping, and a
// pseudo-version of its commit with it, whose revision it prints too.
func TestVersionOfBinary(t *testing.T) {
	out, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("turnstile --version: %v\n%s", err, out)
	}
	first, rest, _ := strings.Cut(string(out), "\n")
	switch {
	case first == "turnstile (devel)":
		if !strings.Contains(rest, "revision unknown") {
			t.Fatalf("a (devel) build without VCS information printed:\n%s", out)
		}
	case pseudoVersion.MatchString(first):
		rev := pseudoVersion.FindStringSubmatch(first)[1]
		if !strings.Contains(rest, "revision "+rev) {
			t.Fatalf("a build stamped with commit %s does not print its revision:\n%s", rev, out)
		}
	default:
		t.Fatalf("turnstile --version printed:\n%s\nwant (devel) or a pseudo-version of the checkout's commit", out)
	}
}

// pseudoVersion is the module version Go stamps into a binary built in a
// git work tree: v0.0.0-DATE-REVISION, +dirty for uncommitted changes.
var pseudoVersion = regexp.MustCompile(`^turnstile v\d+\.\d+\.\d+-(?:\S+\.)?\d{14}-([0-9a-f]{12})(?:\+dirty)?$`)

func TestVersionUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"version", "extra"}, {"version", "--jsn"}, {"--version", "x"}} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit code %d, want %d", args, code, exitUsage)
		}
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 2 || stdout.Len() != 0 {
			t.Errorf("%q: want one line and the usage hint on stderr, got:\n%s", args, stderr.String())
		}
	}
}

// TestVersionRevisionFromLinker: where Go stamps no VCS information (a
// git worktree, -buildvcs=false), the revision given with
// -ldflags "-X main.revision=..." is printed, as version -h says.
func TestVersionRevisionFromLinker(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "turnstile")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.revision="+rev, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("turnstile version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "  revision "+rev+"\n") {
		t.Errorf("turnstile version does not print the revision given to the linker:\n%s", out)
	}
	out, err = exec.Command(bin, "version", "--json").CombinedOutput()
	var bi buildInfo
	if err != nil || json.Unmarshal(out, &bi) != nil || bi.Revision != rev {
		t.Errorf("turnstile version --json: %v\n%s", err, out)
	}
	var help bytes.Buffer
	versionCmd(context.Background(), []string{"-h"}, &help, io.Discard)
	if !strings.Contains(help.String(), `-ldflags "-X main.revision=$(git rev-parse HEAD)"`) {
		t.Errorf("version -h does not say how to name the revision:\n%s", help.String())
	}
}

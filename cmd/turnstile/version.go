package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
)

// revision is the commit a build names with
// -ldflags "-X main.revision=$(git rev-parse HEAD)": the way to a revision
// where Go stamps none (see versionUsage). Go's own stamp wins.
var revision string

// buildInfo is what "turnstile version" reports.
type buildInfo struct {
	// Version is the module version the binary was built at: a release
	// tag with go install …@vX.Y.Z; built in a checkout, a pseudo-version
	// of its commit, or "(devel)" without VCS stamping.
	Version string `json:"version"`
	// Revision, Time and Modified describe the commit of a binary built
	// in a git clone with VCS stamping (-buildvcs, on by default); they
	// are empty without it, but for a Revision given with -X
	// main.revision.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Go is the Go release that built the binary.
	Go string `json:"go"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
	// Schemes are the lock store URL schemes compiled in.
	Schemes []string `json:"schemes"`
}

// readBuildInfo reads the binary's build information. Binaries built
// without module support report "unknown" as their version.
func readBuildInfo() buildInfo {
	bi := buildInfo{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Schemes: turnstile.Schemes()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	if info.Main.Version != "" {
		bi.Version = info.Main.Version
	}
	if info.GoVersion != "" {
		bi.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.Revision = s.Value
		case "vcs.time":
			bi.Time = s.Value
		case "vcs.modified":
			bi.Modified = s.Value == "true"
		}
	}
	if bi.Revision == "" {
		bi.Revision = revision
	}
	return bi
}

// text is the human form of bi, one line per fact.
func (bi buildInfo) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "turnstile %s\n", bi.Version)
	if bi.Revision != "" {
		rev := bi.Revision
		if bi.Modified {
			rev += " (modified)"
		}
		fmt.Fprintf(&b, "  revision %s\n", rev)
	} else {
		b.WriteString("  revision unknown (built without VCS information: see \"turnstile version -h\")\n")
	}
	if bi.Time != "" {
		fmt.Fprintf(&b, "  time     %s\n", bi.Time)
	}
	fmt.Fprintf(&b, "  go       %s %s\n", bi.Go, bi.Platform)
	fmt.Fprintf(&b, "  stores   %s\n", strings.Join(bi.Schemes, ", "))
	return b.String()
}

// versionCmd implements "turnstile version" (and "turnstile --version").
func versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("version")
	asJSON := fs.Bool("json", false, "")
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %s", cli.QuoteArg(fs.Arg(0)))
	}
	if code, done := cli.FlagsDone("version", err, func() string { return versionUsage }, stdout, stderr); done {
		return code
	}
	bi := readBuildInfo()
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(bi)
		return exitOK
	}
	fmt.Fprint(stdout, bi.text())
	return exitOK
}

const versionUsage = `Usage: turnstile version [--json]

Print the version of turnstile, the commit it was built from, the Go release
that built it and the lock store URL schemes compiled in.

The version is the module version given to go install (vX.Y.Z). A binary
built with go build in a git clone gets the VCS information Go stamps into
it: a pseudo-version of the commit (v0.0.0-DATE-REVISION, +dirty for
uncommitted changes), the revision, its time and "(modified)". Go stamps
nothing — the version is "(devel)" and the revision "unknown" — when
-buildvcs=false is in effect (on the command line or in GOFLAGS, see
go env GOFLAGS), when git is not installed, and in a checkout made with
git worktree add (Go looks for a .git directory, and a worktree has a .git
file). A binary from a module download has no revision either. To name the
revision in any of these cases, build with:

  go build -ldflags "-X main.revision=$(git rev-parse HEAD)" ./cmd/turnstile

Flags:
  --json  print one JSON object: version, revision, time, modified, go,
          platform, schemes

Exit status:
  0   printed
  64  usage error
`

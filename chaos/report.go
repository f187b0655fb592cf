package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// report is a run's cells and where they came from.
type report struct {
	Cells    []cell
	Command  string
	Commit   string
	Wall     time.Duration
	Settings settings
}

// The markers between which --doc writes the table.
const (
	docBegin = "<!-- chaos:begin (written by go run ./chaos --doc; do not edit by hand) -->"
	docEnd   = "<!-- chaos:end -->"
)

// summary is one cell on one line, for the progress log.
func summary(c cell) string {
	switch {
	case c.Error != "":
		return fmt.Sprintf("%s × %s: could not run: %s", c.Store, c.Fault, c.Error)
	case c.Skipped != "":
		return fmt.Sprintf("%s × %s: not run: %s", c.Store, c.Fault, c.Skipped)
	}
	v := c.Verdict
	line := fmt.Sprintf("%s × %s: %s; %d sections, %d faults, fenced violations %d, control lost %d, stale refused %d, overlaps %d, double grants %d",
		c.Store, c.Fault, verdictText(c), v.Sections, c.Faults, v.Violations(), v.ControlLost, v.StaleRefused, v.Overlaps, v.DoubleGrants)
	if c.Fault == "failover" {
		line += fmt.Sprintf(", grants without a replica %d", v.Unreplicated)
	}
	line += fmt.Sprintf(", p99 acquire %.0f ms, recovery %.0f ms (%.1f s)", v.AcquireP99MS, v.RecoveryMS, c.WallSecs)
	if v.DoubleGrant != "" {
		line += "; first double grant: " + v.DoubleGrant
	}
	return line
}

// verdictText is the cell's verdict in words; a cell with a recovery
// bound of its own (slowCells, a lock delay) says which, and why.
func verdictText(c cell) string {
	text := verdictWords(c)
	if c.Error != "" || c.Skipped != "" {
		return text
	}
	if s, ok := slowCells[[2]string{c.Store, c.Fault}]; ok {
		text += fmt.Sprintf(" (recovery bound %.0f ms, by design: %s)", c.Verdict.BoundMS, s.why)
	} else if faults()[c.Fault].lockDelay != nil {
		text += fmt.Sprintf(" (recovery bound %.0f ms: 2 leases + %v + the lock delay)", c.Verdict.BoundMS, recoverySlack)
	}
	return text
}

func verdictWords(c cell) string {
	v := c.Verdict
	switch {
	case c.Error != "":
		return "could not run: " + c.Error
	case c.Skipped != "":
		return "not run: " + c.Skipped
	case v.Violations() > 0:
		return "UNSAFE: " + v.Example
	case v.Linearizable == "unknown":
		return "undecided: the linearizability check timed out"
	case v.Unrecovered > 0:
		return fmt.Sprintf("LIVENESS: no grant within %.0f ms of %d heal(s)", v.BoundMS, v.Unrecovered)
	case v.ControlLost == 0:
		return "safe; the fault did not break mutual exclusion (the control lost nothing)"
	default:
		return "safe; the fence refused what the control lost"
	}
}

// markdown renders the report: how it was made, then one table per store.
func (r report) markdown() string {
	var b strings.Builder
	keys := ""
	if r.Settings.Keys > 1 {
		keys = fmt.Sprintf(", each locking %d keys side by side", r.Settings.Keys)
	}
	fmt.Fprintf(&b, "Produced by `%s` at commit %s on %s (%d workers%s, TTL %v, hold %v, faults injected for %v per cell; wall time %v). A grant is due within 2 leases + %v of each heal, unless a row states a bound of its own.\n\n",
		r.Command, r.Commit, time.Now().UTC().Format("2006-01-02"), r.Settings.Workers, keys, r.Settings.TTL, r.Settings.Hold, r.Settings.Duration, r.Wall.Round(time.Second), recoverySlack)
	b.WriteString("Columns: **sections** — critical sections entered (on every key); **fenced violations** — token-order violations plus lost acknowledged increments of the fenced register plus a non-linearizable history (must be 0); **control lost** — increments the unfenced control register lost under the same fault (a positive number shows the fault broke mutual exclusion); **refused** — stale writes the fence refused; **double grants** — sections granted while an earlier holder's lease was still valid by the store's own clock; **without a replica** — sections granted while the key's primary was cut off from its replica, which a failover then loses (counted on the failover rows; — on the others); **p99 acquire** — of acquisitions begun during a fault; **recovery** — the longest time from a heal to the next grant.\n\n")
	var store string
	for _, c := range r.Cells {
		if c.Store != store {
			if store != "" {
				b.WriteString("\n")
			}
			store = c.Store
			fmt.Fprintf(&b, "### %s — %s\n\n", c.Store, c.Config)
			b.WriteString("| fault | sections | fenced violations | control lost | refused | double grants | without a replica | p99 acquire | recovery | verdict |\n")
			b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
		}
		if c.Error != "" || c.Skipped != "" {
			fmt.Fprintf(&b, "| %s | | | | | | | | | %s |\n", c.Fault, escapeCell(verdictText(c)))
			continue
		}
		v := c.Verdict
		unreplicated := "—" // only a failover cuts a primary off from its replica
		if c.Fault == "failover" {
			unreplicated = strconv.Itoa(v.Unreplicated)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s | %.0f ms | %.0f ms | %s |\n",
			c.Fault, v.Sections, v.Violations(), v.ControlLost, v.StaleRefused, v.DoubleGrants, unreplicated, v.AcquireP99MS, v.RecoveryMS, escapeCell(verdictText(c)))
	}
	b.WriteString("\nThe faults:\n\n")
	kinds := faults()
	seen := map[string]bool{}
	for _, c := range r.Cells {
		if !seen[c.Fault] {
			seen[c.Fault] = true
			fmt.Fprintf(&b, "- **%s**: %s.\n", c.Fault, kinds[c.Fault].desc)
		}
	}
	return b.String()
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// writeInto replaces what lies between the chaos markers of the markdown
// file at path with the report.
func (r report) writeInto(path string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(doc, []byte(docBegin))
	j := bytes.Index(doc, []byte(docEnd))
	if i < 0 || j < i {
		return errors.New(path + " has no chaos markers: add the lines\n" + docBegin + "\n" + docEnd)
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(docBegin)])
	out.WriteString("\n")
	out.WriteString(r.markdown())
	out.Write(doc[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// status is the exit status: 1 if a fenced register was unsafe, 2 if a
// cell could not run, else 0.
func (r report) status() int {
	code := 0
	for _, c := range r.Cells {
		switch {
		case c.Error != "":
			code = max(code, 2)
		case c.Skipped == "" && (c.Verdict.Violations() > 0 || c.Verdict.Linearizable == "unknown" || c.Verdict.Unrecovered > 0):
			return 1
		}
	}
	return code
}

func commandLine(args []string) string {
	return strings.TrimSpace("go run ./chaos " + strings.Join(args, " "))
}

// commit is the checkout's commit, marked dirty when it has changes.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

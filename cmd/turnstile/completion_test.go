package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// completion returns the script "turnstile completion shell" prints.
func completion(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"completion", shell}, &stdout, &stderr); code != exitOK {
		t.Fatalf("completion %s: exit code %d; stderr:\n%s", shell, code, stderr.String())
	}
	return stdout.String()
}

// runFlagNames are the flags "turnstile run" defines.
func runFlagNames() []string {
	fs, _, _, _, _ := newRunFlagSet(&runOptions{})
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
	return names
}

// TestCompletionScripts: every script names every command, every flag
// of run, and bench's and demo's --backend; each one parses in its shell
// where that shell is installed.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			script := completion(t, shell)
			for _, c := range commands {
				if !strings.Contains(script, c.name) {
					t.Errorf("the %s script does not name the %s command", shell, c.name)
				}
			}
			for _, f := range runFlagNames() {
				name := f
				if shell == "fish" {
					name = "-l " + strings.TrimPrefix(f, "--")
				}
				if !strings.Contains(script, name) {
					t.Errorf("the %s script does not complete run's %s", shell, f)
				}
			}
			path := filepath.Join(t.TempDir(), "turnstile."+shell)
			if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
				t.Fatal(err)
			}
			sh, err := exec.LookPath(shell)
			if err != nil {
				// Not installed: the text's structure is checked below.
				t.Logf("%s is not installed: only the script's text is checked", shell)
			} else if out, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s\n%s", shell, err, out, script)
			}
			switch shell {
			case "bash":
				if !strings.Contains(script, "complete -o default -o bashdefault -F _turnstile turnstile") {
					t.Error("the bash script does not register _turnstile")
				}
			case "zsh":
				if !strings.HasPrefix(script, "#compdef turnstile\n") || !strings.Contains(script, "compdef _turnstile turnstile") {
					t.Error("the zsh script does not register _turnstile")
				}
				// After "--" every command takes arguments, not flags.
				if !strings.Contains(script, "    if (( sep < CURRENT )); then\n") {
					t.Error("the zsh script completes flags after \"--\"")
				}
			case "fish":
				for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
					if !strings.HasPrefix(line, "complete -c turnstile ") && !strings.HasPrefix(line, "#") {
						t.Errorf("fish line is no completion: %q", line)
					}
				}
			}
		})
	}
}

// TestBashCompletes runs the bash script's function as bash would for a
// few command lines and checks what it offers.
func TestBashCompletes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to test the bash completion: apt-get install -y bash")
	}
	path := filepath.Join(t.TempDir(), "turnstile.bash")
	if err := os.WriteFile(path, []byte(completion(t, "bash")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string // the words, the last one being completed
		want []string
		not  []string
	}{
		{"turnstile ", []string{"run", "status", "ls", "unlock", "bench", "completion", "version", "--version"}, nil},
		{"turnstile co", []string{"completion"}, []string{"run"}},
		{"turnstile run --b", []string{"--backend", "--backend-file"}, []string{"--key"}},
		{"turnstile run --key k --f", []string{"--fair"}, nil},
		{"turnstile bench --b", []string{"--backend"}, nil},
		{"turnstile demo --b", []string{"--backend"}, nil},
		{"turnstile completion ", []string{"bash", "zsh", "fish"}, nil},
		{"turnstile help r", []string{"run"}, nil},
		{"turnstile run --key k -- ech", []string{"echo"}, []string{"--backend"}},
		// After "--" no flags: positional arguments only.
		{"turnstile status -- -", nil, []string{"--json", "--backend"}},
		{"turnstile unlock k -- --", nil, []string{"--force"}},
		{"turnstile run --key k -- echo -", nil, []string{"--key", "--backend"}},
		{"turnstile -- ", nil, []string{"run", "--version"}},
	} {
		words := strings.Split(tc.line, " ")
		prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _turnstile; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command("bash", append([]string{"-c", prog, "bash", path}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, out)
		}
		got := strings.Fields(string(out))
		seen := map[string]bool{}
		for _, w := range got {
			if seen[w] {
				t.Errorf("%q: offers %s more than once: %v", tc.line, w, got)
			}
			seen[w] = true
		}
		for _, w := range tc.want {
			if !contains(got, w) {
				t.Errorf("%q: offers %v, not %s", tc.line, got, w)
			}
		}
		for _, w := range tc.not {
			if contains(got, w) {
				t.Errorf("%q: offers %s", tc.line, w)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCompletionUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit code %d, want %d", args, code, exitUsage)
		}
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 2 || stdout.Len() != 0 {
			t.Errorf("%q: want one line and the usage hint on stderr, got:\n%s", args, stderr.String())
		}
	}
}

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/tools/internal/readme"
)

// installCheck proves that a release of the working tree at version can be
// installed and used the way users will: it copies the working tree (what
// git tracks or would add) into a new repository, runs
// scripts/release.sh there with a local module proxy, and then, with no
// workspace, an empty module cache and that proxy first in GOPROXY, runs
// `go install …/cmd/turnstile@version` and the installed binary, and builds
// a fresh module that `go get`s the root and the redis backend and holds
// the README's program from its "Use" section.
func installCheck(root, version string, keep bool, out io.Writer) (err error) {
	start := time.Now()
	tmp, err := os.MkdirTemp("", "turnstile-install-check-")
	if err != nil {
		return err
	}
	modcache, cleanup, err := newModCache()
	if err != nil {
		return err
	}
	defer func() {
		if keep {
			fmt.Fprintf(out, "kept %s and the module cache %s\n", tmp, modcache)
			return
		}
		cleanup()
		os.RemoveAll(tmp)
	}()
	step := func(format string, args ...any) {
		fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	repo := filepath.Join(tmp, "repo")
	if err := copyWorkTree(root, repo); err != nil {
		return err
	}
	gitEnv := append(os.Environ(),
		"GIT_AUTHOR_NAME=turnstile release check", "GIT_AUTHOR_EMAIL=release-check@invalid",
		"GIT_COMMITTER_NAME=turnstile release check", "GIT_COMMITTER_EMAIL=release-check@invalid",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"commit", "-q", "-m", "working tree"},
	} {
		if err := run(repo, gitEnv, "git", args...); err != nil {
			return err
		}
	}
	step("copied the working tree to %s", repo)

	proxyDir := filepath.Join(tmp, "proxy")
	cmd := exec.Command("./scripts/release.sh", "--proxy", proxyDir, version)
	cmd.Dir = repo
	cmd.Env = gitEnv
	var rel bytes.Buffer
	cmd.Stdout = io.MultiWriter(&rel, &prefixWriter{w: out, prefix: "  release.sh: "})
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/release.sh %s: %v", version, err)
	}
	step("scripts/release.sh %s: committed and tagged, tags verified against the proxy", version)

	gobin := filepath.Join(tmp, "bin")
	env := proxyEnv(proxyDir, modcache, "GOBIN="+gobin)
	if err := run(tmp, env, "go", "install", rootPath+"/cmd/turnstile@"+version); err != nil {
		return err
	}
	step("go install %s/cmd/turnstile@%s (empty module cache, no workspace)", rootPath, version)

	bin := filepath.Join(gobin, "turnstile")
	if _, err := os.Stat(filepath.Join(repo, "cmd", "turnstile", "version.go")); err == nil {
		got, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("turnstile version: %v\n%s", err, got)
		}
		if !strings.Contains(string(got), version) {
			return fmt.Errorf("turnstile version prints %q, which does not name %s", strings.TrimSpace(string(got)), version)
		}
		step("turnstile version: %s", strings.TrimSpace(string(got)))
	} else {
		got, err := exec.Command(bin, "help").CombinedOutput()
		if err != nil {
			return fmt.Errorf("turnstile help: %v\n%s", err, got)
		}
		if !strings.Contains(string(got), "run") {
			return fmt.Errorf("turnstile help does not list the run command:\n%s", got)
		}
		step("turnstile help: exit 0, %d lines", strings.Count(string(got), "\n"))
	}

	md, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		return err
	}
	prog, err := readme.Program(string(md), "Use")
	if err != nil {
		return fmt.Errorf("README.md: %v", err)
	}
	app := filepath.Join(tmp, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(prog.Code), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"mod", "init", "example.com/app"},
		{"get", rootPath + "@" + version, rootPath + "/redis@" + version},
		{"build", "-o", "app", "."},
	} {
		if err := run(app, env, "go", args...); err != nil {
			return err
		}
	}
	step("a fresh module: go get turnstile and turnstile/redis @%s, go build of the README's program (README.md line %d)", version, prog.Line)
	return nil
}

// copyWorkTree copies the files git tracks or would add in root, as they
// are in the working tree, to dst.
func copyWorkTree(root, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(string(list), "\x00") {
		if name == "" {
			continue
		}
		src := filepath.Join(root, filepath.FromSlash(name))
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		to := filepath.Join(dst, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
			continue
		}
		if !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// prefixWriter writes each line with a prefix.
type prefixWriter struct {
	w       io.Writer
	prefix  string
	midLine bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		if !p.midLine {
			line = p.prefix + line
		}
		p.midLine = !strings.HasSuffix(line, "\n")
		if _, err := io.WriteString(p.w, line); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

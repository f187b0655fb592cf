package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A small repository shaped like turnstile's: the root module, a library
// module a that requires it, and a command module b that requires both, each
// with replace directives and v0.0.0 requirements as before the first release.
func syntheticRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	script, err := os.ReadFile("../../scripts/release.sh")
	if err != nil {
		t.Fatal(err)
	}
	gitRepo(t, dir, map[string]string{
		"go.mod":    "module " + rootPath + "\n\ngo 1.26.0\n",
		"go.work":   "go 1.26.0\n\nuse (\n\t.\n\t./a\n\t./b\n)\n",
		"LICENSE":   "license text\n",
		"lock.go":   "package turnstile\n\nconst Name = \"root\"\n",
		"README.md": "# synthetic\n",
		"a/go.mod": "module " + rootPath + "/a\n\ngo 1.26.0\n\nrequire " + rootPath + " v0.0.0\n\n" +
			"replace " + rootPath + " => ../\n",
		"a/a.go": "package a\n\nimport \"" + rootPath + "\"\n\nconst Name = turnstile.Name + \"/a\"\n",
		"b/go.mod": "module " + rootPath + "/b\n\ngo 1.26.0\n\nrequire (\n\t" + rootPath + " v0.0.0\n\t" + rootPath + "/a v0.0.0\n)\n\n" +
			"replace (\n\t" + rootPath + " => ../\n\t" + rootPath + "/a => ../a\n)\n",
		"b/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"" + rootPath + "\"\n\t\"" + rootPath + "/a\"\n)\n\n" +
			"func main() { fmt.Println(turnstile.Name, a.Name) }\n",
		".gitignore": "/b/b\n",
	})
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "release.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "release script")
	return dir
}

// releaseTool builds this package, the tool scripts/release.sh runs.
func releaseTool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "release")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func releaseScript(t *testing.T, dir, tool string, args ...string) (string, int) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("release.sh %s: %.1fs", strings.Join(args, " "), time.Since(start).Seconds()) }()
	cmd := exec.Command("./scripts/release.sh", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), gitEnv...), "TURNSTILE_RELEASE_TOOL="+tool)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func TestReleaseScript(t *testing.T) {
	tool := releaseTool(t)
	dir := syntheticRepo(t)
	head := git(t, dir, "rev-parse", "HEAD")

	// Bad input: usage error, one clear line, nothing changed.
	out, code := releaseScript(t, dir, tool, "0.2.0")
	if code != exitUsage || !strings.Contains(out, `version "0.2.0" does not start with v (want v0.2.0)`) {
		t.Errorf("release.sh 0.2.0: exit %d, output %q; want 64 and the reason", code, out)
	}
	if out, code := releaseScript(t, dir, tool); code != exitUsage || !strings.Contains(out, "usage:") {
		t.Errorf("release.sh without a version: exit %d, output %q", code, out)
	}

	// A dirty tree is refused.
	if err := os.WriteFile(filepath.Join(dir, "a", "new.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = releaseScript(t, dir, tool, "v0.2.0")
	if code != 1 || !strings.Contains(out, "uncommitted changes") {
		t.Errorf("release.sh on a dirty tree: exit %d, output %q", code, out)
	}
	if err := os.Remove(filepath.Join(dir, "a", "new.go")); err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Fatal("a refused release committed")
	}

	// The release.
	proxy := filepath.Join(t.TempDir(), "proxy")
	out, code = releaseScript(t, dir, tool, "--proxy", proxy, "v0.2.0")
	if code != 0 {
		t.Fatalf("release.sh v0.2.0: exit %d\n%s", code, out)
	}
	tagsAt := strings.Index(out, "== tags, in dependency order\n")
	if tagsAt < 0 || !strings.HasPrefix(out[tagsAt:], "== tags, in dependency order\nv0.2.0\na/v0.2.0\nb/v0.2.0\n") {
		t.Errorf("tags not made in dependency order:\n%s", out)
	}
	if !strings.Contains(out, "git push origin main v0.2.0 a/v0.2.0 b/v0.2.0") {
		t.Errorf("no push command printed:\n%s", out)
	}
	if tags := git(t, dir, "tag", "--points-at", "HEAD"); tags != "a/v0.2.0\nb/v0.2.0\nv0.2.0\n" {
		t.Errorf("tags at HEAD: %q", tags)
	}
	if msg := git(t, dir, "log", "-1", "--format=%s"); !strings.HasPrefix(msg, "release v0.2.0:") {
		t.Errorf("release commit: %q", msg)
	}
	if st := git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("the release left changes behind:\n%s", st)
	}
	bmod := git(t, dir, "show", "b/v0.2.0:b/go.mod")
	if strings.Contains(bmod, "replace") || !strings.Contains(bmod, rootPath+"/a v0.2.0") || !strings.Contains(bmod, rootPath+" v0.2.0") {
		t.Errorf("b/go.mod at b/v0.2.0:\n%s", bmod)
	}
	bsum := git(t, dir, "show", "b/v0.2.0:b/go.sum")
	for _, want := range []string{rootPath + " v0.2.0 h1:", rootPath + "/a v0.2.0 h1:", rootPath + "/a v0.2.0/go.mod h1:"} {
		if !strings.Contains(bsum, want) {
			t.Errorf("b/go.sum at b/v0.2.0 lacks %q:\n%s", want, bsum)
		}
	}
	if work := git(t, dir, "show", "v0.2.0:go.work"); !strings.Contains(work, rootPath+"/a v0.2.0 => ./a") {
		t.Errorf("go.work at v0.2.0 does not replace a@v0.2.0 by ./a:\n%s", work)
	}
	// The workspace still builds, before anything is published.
	build := exec.Command("go", "build", "./...")
	build.Dir = filepath.Join(dir, "b")
	build.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Errorf("workspace build after the release: %v\n%s", err, out)
	}

	// The tagged tree builds with no workspace, turnstile modules from the
	// proxy only, and go.sum as committed (-mod=readonly).
	tree := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", "git archive b/v0.2.0 | tar -x -C "+tree)
	archive.Dir = dir
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, out)
	}
	modcache, cleanup, err := newModCache()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	env := proxyEnv(proxy, modcache)
	if err := run(filepath.Join(tree, "b"), append(env, "GOFLAGS=-mod=readonly", "GOPROXY=file://"+proxy), "go", "build", "./..."); err != nil {
		t.Errorf("the tagged b does not build from the proxy: %v", err)
	}
	// And installs the way a user would.
	gobin := filepath.Join(t.TempDir(), "bin")
	if err := run(t.TempDir(), append(env, "GOBIN="+gobin), "go", "install", rootPath+"/b@v0.2.0"); err != nil {
		t.Fatalf("go install b@v0.2.0: %v", err)
	}
	got, err := exec.Command(filepath.Join(gobin, "b")).Output()
	if err != nil || string(got) != "root root/a\n" {
		t.Errorf("installed b printed %q, %v", got, err)
	}

	// Tags that exist are not made again.
	out, code = releaseScript(t, dir, tool, "v0.2.0")
	if code != 1 || !strings.Contains(out, "tag v0.2.0 already exists") {
		t.Errorf("a second release v0.2.0: exit %d, output %q", code, out)
	}

	// verify-tags refuses a release whose proxy zip is not what git makes
	// of the tag: here a, zipped again from a work tree with one more file.
	if err := os.WriteFile(filepath.Join(dir, "a", "extra.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := addToProxy(dir, proxy, Module{Dir: "a", Path: rootPath + "/a"}, "v0.2.0"); err != nil {
		t.Fatal(err)
	}
	err = run(dir, os.Environ(), tool, "verify-tags", "-proxy", proxy, "v0.2.0")
	if err == nil || !strings.Contains(err.Error(), "the zip git makes at tag a/v0.2.0 hashes") {
		t.Fatalf("verify-tags with a proxy zip that is not the tag: %v", err)
	}
}

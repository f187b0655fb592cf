package main

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v1.2.3", "v0.0.0-test.1", "v1.0.0-rc.2"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("checkVersion(%q) = %v, want nil", v, err)
		}
	}
	for v, want := range map[string]string{
		"":               "no version given",
		"0.1.0":          "does not start with v (want v0.1.0)",
		"v0.1":           "not in canonical form (want v0.1.0",
		"v1":             "not in canonical form (want v1.0.0",
		"v1.2.3+build":   "not in canonical form (want v1.2.3",
		"v1.2.3.4":       "is not a semantic version",
		"vx.y.z":         "is not a semantic version",
		"v2.0.0":         "needs module paths ending in /v2",
		"v0.1.0 ":        "is not a semantic version",
		"v0.1.0\nv0.2.0": "is not a semantic version",
	} {
		err := checkVersion(v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkVersion(%q) = %v, want an error containing %q", v, err, want)
		}
	}
}

func FuzzCheckVersion(f *testing.F) {
	for _, s := range []string{"v0.1.0", "0.1.0", "v1.2", "v1.2.3-rc.1+meta", "v01.2.3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if checkVersion(v) != nil {
			return
		}
		// An accepted version makes a valid module version and tag.
		if err := module.Check(rootPath+"/redis", v); err != nil {
			t.Fatalf("checkVersion accepted %q, which module.Check refuses: %v", v, err)
		}
		if strings.ContainsAny(v, " \t\n/") {
			t.Fatalf("checkVersion accepted %q, no tag name", v)
		}
	})
}

func TestTagNames(t *testing.T) {
	for _, c := range []struct{ dir, want string }{
		{".", "v0.1.0"},
		{"redis", "redis/v0.1.0"},
		{"cmd/turnstile", "cmd/turnstile/v0.1.0"},
	} {
		if got := (Module{Dir: c.dir}).Tag("v0.1.0"); got != c.want {
			t.Errorf("Tag of %s = %q, want %q", c.dir, got, c.want)
		}
	}
}

func mods(dirs ...string) []Module {
	var out []Module
	for _, d := range dirs {
		p := rootPath
		if d != "." {
			p += "/" + d
		}
		out = append(out, Module{Dir: d, Path: p})
	}
	return out
}

func TestOrderPutsDependenciesFirst(t *testing.T) {
	ms := mods("cmd/turnstile", "redlock", "redis", ".", "bench")
	deps := map[string][]string{
		rootPath + "/cmd/turnstile": {rootPath, rootPath + "/bench", rootPath + "/redis"},
		rootPath + "/bench":         {rootPath, rootPath + "/redlock", rootPath + "/redis"},
		rootPath + "/redlock":       {rootPath, rootPath + "/redis"},
		rootPath + "/redis":         {rootPath},
	}
	got, err := order(ms, deps)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range got {
		dirs = append(dirs, m.Dir)
	}
	if want := ". redis redlock bench cmd/turnstile"; strings.Join(dirs, " ") != want {
		t.Errorf("order = %v, want %s", dirs, want)
	}
}

func TestOrderRefusesACycle(t *testing.T) {
	ms := mods(".", "a", "b", "c")
	deps := map[string][]string{
		rootPath + "/a": {rootPath, rootPath + "/b"},
		rootPath + "/b": {rootPath + "/c"},
		rootPath + "/c": {rootPath + "/a"},
	}
	_, err := order(ms, deps)
	want := "module dependency cycle: " + rootPath + "/a -> " + rootPath + "/b -> " + rootPath + "/c -> " + rootPath + "/a"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("order of a cycle = %v, want an error containing %q", err, want)
	}
	_, err = order(mods(".", "a"), map[string][]string{rootPath + "/a": {rootPath + "/gone"}})
	if err == nil || !strings.Contains(err.Error(), "not a module of this workspace") {
		t.Fatalf("order with an unknown dependency = %v", err)
	}
}

func TestSetRequires(t *testing.T) {
	in := `module github.com/turnstilelock/turnstile/cmd/turnstile

go 1.26.0

require (
	github.com/redis/rueidis v1.0.79
	github.com/turnstilelock/turnstile v0.0.0
	github.com/turnstilelock/turnstile/redis v0.0.0 // indirect
)

replace github.com/turnstilelock/turnstile => ../../

replace (
	github.com/turnstilelock/turnstile/redis => ../../redis
	example.com/other => ./other
)
`
	out, err := setRequires("go.mod", []byte(in), mods(".", "redis", "cmd/turnstile"), "v0.3.0")
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{
		"github.com/redis/rueidis v1.0.79",
		"github.com/turnstilelock/turnstile v0.3.0\n",
		"github.com/turnstilelock/turnstile/redis v0.3.0 // indirect",
		"example.com/other => ./other",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten go.mod lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "../") || strings.Contains(got, "v0.0.0") {
		t.Errorf("rewritten go.mod still replaces or requires v0.0.0:\n%s", got)
	}
	_, err = setRequires("go.mod", []byte("module x\n\nrequire github.com/turnstilelock/turnstile/gone v0.1.0\n"), mods("."), "v0.3.0")
	if err == nil || !strings.Contains(err.Error(), "not a module of this workspace") {
		t.Errorf("a requirement of an unknown turnstile module: %v", err)
	}
}

func TestDropTurnstileSums(t *testing.T) {
	in := "github.com/redis/rueidis v1.0.79 h1:aaa=\n" +
		"github.com/turnstilelock/turnstile v0.1.0 h1:bbb=\n" +
		"github.com/turnstilelock/turnstile/redis v0.1.0/go.mod h1:ccc=\n" +
		"github.com/turnstilelockx/other v0.1.0 h1:ddd=\n"
	got := string(dropTurnstileSums([]byte(in)))
	want := "github.com/redis/rueidis v1.0.79 h1:aaa=\ngithub.com/turnstilelockx/other v0.1.0 h1:ddd=\n"
	if got != want {
		t.Errorf("dropTurnstileSums = %q, want %q", got, want)
	}
	if n := len(turnstileSums([]byte(in))); n != 2 {
		t.Errorf("turnstileSums found %d lines, want 2", n)
	}
}

// gitRepo makes a git repository in dir from files and commits them.
func gitRepo(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	writeFiles(t, dir, files)
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "initial")
}

var gitEnv = []string{
	"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@invalid",
	"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@invalid",
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestModuleFilesLeaveOutNestedModulesAndAddTheLicense(t *testing.T) {
	dir := t.TempDir()
	gitRepo(t, dir, map[string]string{
		"go.mod":           "module " + rootPath + "\n",
		"LICENSE":          "license text\n",
		"a.go":             "package turnstile\n",
		"redis/go.mod":     "module " + rootPath + "/redis\n",
		"redis/r.go":       "package redis\n",
		"redis/sub/go.mod": "module " + rootPath + "/redis/sub\n",
		"redis/sub/s.go":   "package sub\n",
		".gitignore":       "*.out\n",
	})
	if err := os.WriteFile(filepath.Join(dir, "redis", "ignored.out"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "redis", "new.go"), []byte("package redis\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := moduleFiles(dir, Module{Dir: "redis", Path: rootPath + "/redis"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := modzip.Create(&buf, module.Version{Path: rootPath + "/redis", Version: "v0.1.0"}, files); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, strings.TrimPrefix(f.Name, rootPath+"/redis@v0.1.0/"))
	}
	if got, want := strings.Join(names, " "), "LICENSE go.mod new.go r.go"; got != want {
		t.Errorf("redis's zip holds %s, want %s", got, want)
	}
}

func TestCheckGraph(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module "+rootPath+"\n\ngo 1.26.0\n")
	write("a/go.mod", "module "+rootPath+"/a\n\ngo 1.26.0\n\nrequire "+rootPath+" v0.1.0\n")
	write("b/go.mod", "module "+rootPath+"/b\n\ngo 1.26.0\n\nrequire "+rootPath+"/a v0.1.0\n")
	write("go.work", "go 1.26.0\n\nuse (\n\t.\n\t./a\n\t./b\n)\n")
	if err := checkGraph(dir, io.Discard); err == nil || !strings.Contains(err.Error(), "go.work does not replace every module at v0.1.0") {
		t.Errorf("a go.work without the replacements: %v", err)
	}
	if err := setVersion(dir, "v0.1.0", io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := checkGraph(dir, io.Discard); err != nil {
		t.Errorf("after set-version: %v", err)
	}
	// The same replacements written another way (as go work edit does).
	write("go.work", "go 1.26.0\n\nuse (\n\t.\n\t./a\n\t./b\n)\n\n"+
		"replace "+rootPath+" v0.1.0 => ./\n\nreplace "+rootPath+"/a v0.1.0 => ./a\n\nreplace "+rootPath+"/b v0.1.0 => ./b\n")
	if err := checkGraph(dir, io.Discard); err != nil {
		t.Errorf("replacements one per line: %v", err)
	}
	// A module added the old way: a v0.0.0 requirement and a replace.
	write("b/go.mod", "module "+rootPath+"/b\n\ngo 1.26.0\n\nrequire (\n\t"+rootPath+" v0.0.0\n\t"+rootPath+"/a v0.1.0\n)\n\nreplace "+rootPath+" => ../\n")
	if err := checkGraph(dir, io.Discard); err == nil || !strings.Contains(err.Error(), "at 2 versions (v0.0.0, v0.1.0)") {
		t.Errorf("a v0.0.0 requirement: %v", err)
	}
	write("b/go.mod", "module "+rootPath+"/b\n\ngo 1.26.0\n\nrequire "+rootPath+"/a v0.1.0\n\nreplace "+rootPath+"/a v0.1.0 => ../a\n")
	if err := checkGraph(dir, io.Discard); err == nil || !strings.Contains(err.Error(), "b/go.mod: replaces "+rootPath+"/a") {
		t.Errorf("a replace directive: %v", err)
	}
}

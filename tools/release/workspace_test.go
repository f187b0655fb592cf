package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/tools/internal/readme"
)

// offlineEnv is the environment of the go commands that build the user's
// module: no module proxy and no checksum database, so that only the
// checkout and the module cache can provide modules, and GOWORK and GOFLAGS
// cleared so that the go.work found from the directory decides. (GOFLAGS
// cannot be -mod=mod: the go command refuses it in workspace mode.)
func offlineEnv() []string {
	return append(os.Environ(), "GOWORK=", "GOFLAGS=", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local")
}

func goCmd(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestWorkspaceBuildsTheREADMEProgram: a fresh module holding the README's
// program (it imports the root and the redis backend, which requires fence)
// does not build while v0.1.0 is unpublished; after `release workspace DIR`
// run in this checkout it does, and a second run changes nothing.
func TestWorkspaceBuildsTheREADMEProgram(t *testing.T) {
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(checkout, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := readme.Program(string(md), "Use")
	if err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(t.TempDir(), "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(prog.Code), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "go.mod"), []byte("module example.com/app\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := offlineEnv()

	out, err := goCmd(t, app, env, "build", "-o", os.DevNull, ".")
	if err == nil || !strings.Contains(out, rootPath+"/redis") {
		t.Fatalf("before the workspace command, go build: %v\n%s\nwant a failure naming %s/redis", err, out, rootPath)
	}

	tool := releaseTool(t)
	workspace := func(from string) string {
		t.Helper()
		cmd := exec.Command(tool, "workspace", app)
		cmd.Dir = from
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("release workspace %s (in %s): %v\n%s", app, from, err, out)
		}
		return string(out)
	}
	out = workspace(checkout)
	for _, want := range []string{
		"go.mod: requires " + rootPath + " v0.1.0 (imported by main.go)",
		"go.mod: requires " + rootPath + "/redis v0.1.0 (imported by main.go)",
		"go.work: new workspace",
		rootPath + "/fence v0.1.0 => " + filepath.Join(checkout, "fence") + " (required by " + rootPath + "/redis)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the workspace command's output lacks %q:\n%s", want, out)
		}
	}

	// The module cache holds the third-party modules at the versions the
	// checkout's workspace selects (the next command fetches any it lacks,
	// as a build in the checkout would); the user's module is pinned to
	// those, since the offline build below can use no other.
	if out, err := goCmd(t, checkout, os.Environ(), "list", "-deps", rootPath+"/redis"); err != nil {
		t.Fatalf("go list -deps %s/redis in the checkout: %v\n%s", rootPath, err, out)
	}
	pinToWorkspace(t, checkout, app, env)

	if out, err := goCmd(t, app, env, "build", "-o", os.DevNull, "."); err != nil {
		t.Fatalf("after the workspace command, go build: %v\n%s", err, out)
	}
	// The build loads only the go.mod files it needs; the whole module
	// graph, as go list -m all, go test all or a later import load it,
	// needs fence (through redis) resolved too.
	if out, err := goCmd(t, app, env, "list", "-m", "all"); err != nil {
		t.Fatalf("after the workspace command, go list -m all: %v\n%s", err, out)
	}
	out, err = goCmd(t, app, env, "list", "-m", rootPath+"/fence")
	if want := rootPath + "/fence v0.1.0 => " + filepath.Join(checkout, "fence"); err != nil || strings.TrimSpace(out) != want {
		t.Errorf("go list -m %s/fence: %v\n%s\nwant %s", rootPath, err, out, want)
	}
	gomod, _ := os.ReadFile(filepath.Join(app, "go.mod"))
	gowork, _ := os.ReadFile(filepath.Join(app, "go.work"))

	// Again, from a directory deeper in the checkout: nothing changes.
	out = workspace(filepath.Join(checkout, "redis"))
	if !strings.Contains(out, "go.work: already up to date: 3 turnstile modules at v0.1.0") ||
		!strings.Contains(out, "go.mod: already requires what it imports") {
		t.Errorf("a second run does not say it changed nothing:\n%s", out)
	}
	gomod2, _ := os.ReadFile(filepath.Join(app, "go.mod"))
	gowork2, _ := os.ReadFile(filepath.Join(app, "go.work"))
	if !bytes.Equal(gomod, gomod2) || !bytes.Equal(gowork, gowork2) {
		t.Errorf("a second run changed the files:\ngo.mod\n%s\nthen\n%s\ngo.work\n%s\nthen\n%s", gomod, gomod2, gowork, gowork2)
	}
	if out, err := goCmd(t, app, env, "build", "-o", os.DevNull, "."); err != nil {
		t.Fatalf("after the second run, go build: %v\n%s", err, out)
	}
}

// pinToWorkspace requires, in the module in app, every third-party module
// of its graph at the version the checkout's workspace selects, when that
// differs.
func pinToWorkspace(t *testing.T, checkout, app string, env []string) {
	t.Helper()
	versions := func(dir string) map[string]string {
		t.Helper()
		out, err := goCmd(t, dir, env, "list", "-m", "-e", "-f", "{{.Path}} {{.Version}}", "all")
		if err != nil {
			t.Fatalf("go list -m all in %s: %v\n%s", dir, err, out)
		}
		m := make(map[string]string)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				m[f[0]] = f[1]
			}
		}
		return m
	}
	ws := versions(checkout)
	for p, v := range versions(app) {
		if w, ok := ws[p]; ok && w != v && !isTurnstile(p) {
			if out, err := goCmd(t, app, env, "mod", "edit", "-require="+p+"@"+w); err != nil {
				t.Fatalf("go mod edit: %v\n%s", err, out)
			}
		}
	}
}

// fakeCheckout writes a checkout shaped like turnstile's: the root, a
// module a that requires it and a module b that requires a, at v0.1.0.
func fakeCheckout(t *testing.T, dir string) string {
	t.Helper()
	writeFiles(t, dir, map[string]string{
		"go.mod":   "module " + rootPath + "\n\ngo 1.26.0\n",
		"lock.go":  "package turnstile\n",
		"a/go.mod": "module " + rootPath + "/a\n\ngo 1.26.0\n\nrequire " + rootPath + " v0.1.0\n",
		"a/a.go":   "package a\n",
		"b/go.mod": "module " + rootPath + "/b\n\ngo 1.26.0\n\nrequire " + rootPath + "/a v0.1.0\n",
		"b/b.go":   "package b\n",
		"go.work":  "go 1.26.0\n\nuse (\n\t.\n\t./a\n\t./b\n)\n",
	})
	return dir
}

// writeFiles writes files (name: content, names slash-separated) under
// dir, making the folders they need.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWorkspaceWritesAndUpdates(t *testing.T) {
	tmp := t.TempDir()
	checkout := fakeCheckout(t, filepath.Join(tmp, "turnstile"))
	app := filepath.Join(tmp, "app")
	writeFiles(t, app, map[string]string{
		"go.mod":        "module example.com/app\n\ngo 1.26.0\n\nrequire example.com/other v1.0.0\n",
		"main.go":       "package main\n\nimport _ \"" + rootPath + "/b\"\n\nfunc main() {}\n",
		"cmd/x/x.go":    "package main\n\nimport _ \"" + rootPath + "\"\n\nfunc main() {}\n",
		"nested/go.mod": "module example.com/nested\n",
		"nested/n.go":   "package nested\n\nimport _ \"" + rootPath + "/a\"\n",
	})
	var out strings.Builder
	if err := setupWorkspace(checkout, app, &out); err != nil {
		t.Fatal(err)
	}
	gomod := readFile(t, filepath.Join(app, "go.mod"))
	for _, want := range []string{"example.com/other v1.0.0", rootPath + " v0.1.0", rootPath + "/b v0.1.0"} {
		if !strings.Contains(gomod, want) {
			t.Errorf("go.mod lacks %q:\n%s", want, gomod)
		}
	}
	// a comes through b; the nested module's import of it is not the app's.
	if strings.Contains(gomod, rootPath+"/a ") {
		t.Errorf("go.mod requires a, which the module does not import:\n%s", gomod)
	}
	work := readFile(t, filepath.Join(app, "go.work"))
	for _, want := range []string{
		"use .",
		rootPath + " v0.1.0 => " + checkout + "\n",
		rootPath + "/a v0.1.0 => " + filepath.Join(checkout, "a") + "\n",
		rootPath + "/b v0.1.0 => " + filepath.Join(checkout, "b") + "\n",
	} {
		if !strings.Contains(work, want) {
			t.Errorf("go.work lacks %q:\n%s", want, work)
		}
	}
	if !strings.Contains(out.String(), rootPath+"/a v0.1.0 => "+filepath.Join(checkout, "a")+" (required by "+rootPath+"/b)") {
		t.Errorf("the output does not say why a is replaced:\n%s", out.String())
	}

	// Idempotent.
	out.Reset()
	if err := setupWorkspace(checkout, app, &out); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(app, "go.mod")) != gomod || readFile(t, filepath.Join(app, "go.work")) != work {
		t.Errorf("a second run changed the files")
	}
	if !strings.Contains(out.String(), "already up to date") {
		t.Errorf("a second run: %s", out.String())
	}

	// Another checkout, an older requirement and a hand-written replace:
	// the go.work is rewritten in place, with one block of replacements.
	other := fakeCheckout(t, filepath.Join(tmp, "turnstile2"))
	writeFiles(t, app, map[string]string{
		"go.mod": strings.Replace(gomod, rootPath+"/b v0.1.0", rootPath+"/b v0.0.9", 1),
	})
	if err := os.WriteFile(filepath.Join(app, "go.work"), []byte(work+"\nreplace "+rootPath+" => ../elsewhere\n\nreplace example.com/other => ../other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := setupWorkspace(other, app, &out); err != nil {
		t.Fatal(err)
	}
	work2 := readFile(t, filepath.Join(app, "go.work"))
	if strings.Contains(work2, checkout+"\n") || strings.Contains(work2, "elsewhere") ||
		strings.Count(work2, "// turnstile modules at the version") != 1 ||
		!strings.Contains(work2, rootPath+"/a v0.1.0 => "+filepath.Join(other, "a")+"\n") ||
		!strings.Contains(work2, "example.com/other => ../other") {
		t.Errorf("go.work after a run with another checkout:\n%s", work2)
	}
	if !strings.Contains(readFile(t, filepath.Join(app, "go.mod")), rootPath+"/b v0.1.0") ||
		!strings.Contains(out.String(), "the checkout's version (was v0.0.9)") ||
		!strings.Contains(out.String(), "drops replace "+rootPath+" => ../elsewhere") {
		t.Errorf("after a run with another checkout:\n%s", out.String())
	}
}

func TestWorkspaceFindsTheUsersWorkspace(t *testing.T) {
	tmp := t.TempDir()
	checkout := fakeCheckout(t, filepath.Join(tmp, "turnstile"))
	prog := "package main\n\nimport _ \"" + rootPath + "\"\n\nfunc main() {}\n"
	ws := filepath.Join(tmp, "ws")
	writeFiles(t, ws, map[string]string{
		"go.work":       "go 1.26.0\n\nuse (\n\t./app\n\t./lib\n)\n",
		"app/go.mod":    "module example.com/app\n\ngo 1.26.0\n",
		"app/main.go":   prog,
		"lib/go.mod":    "module example.com/lib\n\ngo 1.26.0\n",
		"other/go.mod":  "module example.com/other\n\ngo 1.26.0\n",
		"other/main.go": prog,
	})
	var out strings.Builder
	if err := setupWorkspace(checkout, filepath.Join(ws, "app"), &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "app", "go.work")); err == nil {
		t.Errorf("a go.work was written in app, which the workspace above uses")
	}
	work := readFile(t, filepath.Join(ws, "go.work"))
	if !strings.Contains(work, "./lib") || !strings.Contains(work, rootPath+" v0.1.0 => "+checkout) {
		t.Errorf("the workspace above was not updated in place:\n%s", work)
	}
	// A module the workspace above does not use gets its own go.work.
	out.Reset()
	if err := setupWorkspace(checkout, filepath.Join(ws, "other"), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "it hides "+filepath.Join(ws, "go.work")) {
		t.Errorf("the output does not name the go.work it hides:\n%s", out.String())
	}
	if w := readFile(t, filepath.Join(ws, "other", "go.work")); !strings.Contains(w, "use .") {
		t.Errorf("other/go.work:\n%s", w)
	}
}

func TestWorkspaceRefuses(t *testing.T) {
	tmp := t.TempDir()
	checkout := fakeCheckout(t, filepath.Join(tmp, "turnstile"))
	imports := func(p string) string { return "package main\n\nimport _ \"" + p + "\"\n\nfunc main() {}\n" }
	writeFiles(t, tmp, map[string]string{
		"file":               "",
		"nomod/main.go":      imports(rootPath),
		"nomodline/go.mod":   "go 1.26.0\n",
		"badmod/go.mod":      "module example.com/x\nrequire (\n",
		"none/go.mod":        "module example.com/none\n",
		"none/main.go":       "package main\n\nimport _ \"" + rootPath + "x/y\"\n\nfunc main() {}\n",
		"gone/go.mod":        "module example.com/gone\n\nrequire " + rootPath + "/gone v0.1.0\n",
		"nopkg/go.mod":       "module example.com/nopkg\n",
		"nopkg/main.go":      imports(rootPath + "/service"),
		"theirs/go.work":     "go 1.26.0\n\nuse (\n\t./app\n\t../turnstile/a\n)\n",
		"theirs/app/go.mod":  "module example.com/app\n",
		"theirs/app/main.go": imports(rootPath),
	})
	for _, c := range []struct {
		dir  string
		err  error
		want string
	}{
		{"missing", errNotModule, "missing: no such directory"},
		{"file", errNotModule, "file is not a directory"},
		{"nomod", errNotModule, "nomod has no go.mod (run `go mod init MODULE-PATH` there first)"},
		{"nomodline", errNotModule, "has no module statement"},
		{"badmod", errNotModule, "badmod/go.mod:"},
		{"turnstile/a", errTurnstileWorkspace, "is turnstile's own module " + rootPath + "/a"},
		{"none", errNoTurnstile, "neither imports a turnstile package nor requires a turnstile module"},
		{"gone", errUnknownModule, "requires " + rootPath + "/gone, which the checkout"},
		{"nopkg", errUnknownModule, "main.go imports " + rootPath + "/service, which no module of the checkout"},
		{"theirs/app", errTurnstileWorkspace, "uses turnstile's module " + rootPath + "/a"},
	} {
		dir := filepath.Join(tmp, filepath.FromSlash(c.dir))
		before, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
		err := setupWorkspace(checkout, dir, &strings.Builder{})
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("workspace %s: %v, want %v containing %q", c.dir, err, c.err, c.want)
		}
		if after, _ := os.ReadFile(filepath.Join(dir, "go.mod")); !bytes.Equal(before, after) {
			t.Errorf("workspace %s changed its go.mod though refused", c.dir)
		}
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			t.Errorf("workspace %s wrote a go.work though refused", c.dir)
		}
	}

	// Not a checkout: no root go.mod above, or one without a go.work.
	if _, err := checkoutRoot(filepath.Join(tmp, "none")); !errors.Is(err, errNotCheckout) || !strings.Contains(err.Error(), "run this from a clone of turnstile") {
		t.Errorf("checkoutRoot outside a checkout: %v", err)
	}
	writeFiles(t, tmp, map[string]string{"bare/go.mod": "module " + rootPath + "\n", "bare/sub/x.go": "package sub\n"})
	if _, err := checkoutRoot(filepath.Join(tmp, "bare", "sub")); !errors.Is(err, errNotCheckout) || !strings.Contains(err.Error(), "has no go.work") {
		t.Errorf("checkoutRoot in a root module without go.work: %v", err)
	}
	if got, err := checkoutRoot(filepath.Join(checkout, "b")); err != nil || got != checkout {
		t.Errorf("checkoutRoot in b = %q, %v; want %s", got, err, checkout)
	}

	var ue usageError
	if err := runMain([]string{"workspace"}, &strings.Builder{}, &strings.Builder{}); !errors.As(err, &ue) {
		t.Errorf("workspace without DIR: %v, want a usage error", err)
	}
	if err := runMain([]string{"workspace", "a", "b"}, &strings.Builder{}, &strings.Builder{}); !errors.As(err, &ue) {
		t.Errorf("workspace with two DIRs: %v, want a usage error", err)
	}
}

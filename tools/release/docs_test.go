package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// section returns the text under the heading "## name" of md, up to the
// next heading of that level or above, and the line of the heading; with
// name "", the text before the first "## " heading.
func section(md, name string) (string, int) {
	lines := strings.SplitAfter(md, "\n")
	start, line := -1, 0
	if name == "" {
		start, line = 0, 1
	}
	var b strings.Builder
	for i, l := range lines {
		isHeading := strings.HasPrefix(l, "# ") || strings.HasPrefix(l, "## ")
		if start >= 0 && isHeading && i > start {
			break
		}
		if start < 0 && strings.TrimSpace(l) == "## "+name {
			start, line = i, i+1
			continue
		}
		if start >= 0 && !(name == "" && i == 0 && strings.HasPrefix(l, "# ")) {
			b.WriteString(l)
		}
	}
	if start < 0 {
		return "", 0
	}
	return b.String(), line
}

var backticked = regexp.MustCompile("`([^`]+)`")

// layoutRows returns, for each row of the Markdown table in s, the paths
// its first cell names in backticks, and the row.
func layoutRows(s string) map[string]string {
	rows := make(map[string]string)
	for _, l := range strings.Split(s, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 3 || !strings.HasPrefix(l, "|") {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]] = l
		}
	}
	return rows
}

// docs are the texts that list turnstile's modules.
type docs struct {
	readme, design, releasing string
}

// docProblems returns what the docs lack for the modules in dirs (as
// go.work uses them: ".", "redis", "cmd/turnstile", "tools"), one message
// each, saying what to add where.
func docProblems(dirs []string, d docs) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	versions, versionsLine := section(d.readme, "Versions")
	layout, layoutLine := section(d.readme, "Layout")
	modules, modulesLine := section(d.design, "Modules")
	intro, _ := section(d.releasing, "")
	for name, line := range map[string]int{"README.md": versionsLine, "README.md ": layoutLine, "docs/design.md": modulesLine} {
		if line == 0 {
			add("%s: a section the module lists are checked in is gone (## Versions, ## Layout, ## Modules)", strings.TrimSpace(name))
			return out
		}
	}
	rows := layoutRows(layout)
	isModule := make(map[string]bool)
	for _, dir := range dirs {
		isModule[dir] = true
	}
	for _, dir := range dirs {
		name := "`" + dir + "`"
		switch dir {
		case ".":
			if !strings.Contains(versions, "root") {
				add("README.md line %d, section Versions: name the root package among the modules released together", versionsLine)
			}
			if !strings.Contains(modules, "`"+rootPath+"` (root)") {
				add("docs/design.md line %d, section Modules: name the root module as `%s` (root)", modulesLine, rootPath)
			}
		case toolsDir:
			if !strings.Contains(modules, name) {
				add("docs/design.md line %d, section Modules: name %s, the maintainers' module that is never released", modulesLine, name)
			}
			if !strings.Contains(intro, "`"+dir+"/`") {
				add("docs/releasing.md, first paragraph: name `%s/`, the module that is never released", dir)
			}
		default:
			if !strings.Contains(versions, name) {
				add("README.md line %d, section Versions: add %s to the list of modules released together (\"All its modules — …\")", versionsLine, name)
			}
			if !strings.Contains(modules, name) {
				add("docs/design.md line %d, section Modules: add %s to the bullet of the modules that are their own module (\"Every backend with a heavy client library is its own module …\"), with why it is one", modulesLine, name)
			}
			if !strings.Contains(intro, name) {
				add("docs/releasing.md, first paragraph: add %s to the list of modules released together", name)
			}
		}
		cell := "`" + dir + "/`"
		if dir == "." {
			cell = "`.`"
		}
		row, ok := rows[strings.Trim(cell, "`")]
		switch {
		case !ok:
			add("README.md line %d, section Layout: add a row for the module in %s/:\n\t| %s | what it holds (own module) |", layoutLine, dir, cell)
		case dir != "." && !strings.Contains(row, "own module"):
			add("README.md line %d, section Layout: the row of %s does not say it is its own module; add \"(own module)\":\n\t%s", layoutLine, cell, row)
		}
	}
	// A row that says "own module" names modules only.
	for p, row := range rows {
		dir := strings.TrimSuffix(p, "/")
		if strings.Contains(row, "own module") && !isModule[dir] {
			add("README.md line %d, section Layout: the row of `%s` says \"own module\", but go.work uses no module in %s:\n\t%s", layoutLine, p, dir, row)
		}
	}
	sort.Strings(out)
	return out
}

// workDirs returns the directories go.work in root uses, slash-separated.
func workDirs(t *testing.T, root string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, u := range wf.Use {
		dirs = append(dirs, path.Clean(filepath.ToSlash(u.Path)))
	}
	if len(dirs) < 2 {
		t.Fatalf("go.work uses %d modules", len(dirs))
	}
	return dirs
}

func readDocs(t *testing.T, root string) docs {
	t.Helper()
	read := func(name string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	return docs{readme: read("README.md"), design: read("docs/design.md"), releasing: read("docs/releasing.md")}
}

// TestDocsNameEveryModule: every module go.work uses is named where the
// README (Versions, Layout) and the docs (design.md's Modules, the first
// paragraph of releasing.md) list the modules, so that a new module is
// documented before it merges. Each failure says what to add where.
func TestDocsNameEveryModule(t *testing.T) {
	root := "../.."
	for _, p := range docProblems(workDirs(t, root), readDocs(t, root)) {
		t.Error(p)
	}
}

// TestDocProblemsSayWhatToAdd: a module the docs do not know yet, as a new
// one is before its documentation, is reported in each place, with the
// text to add.
func TestDocProblemsSayWhatToAdd(t *testing.T) {
	root := "../.."
	d := readDocs(t, root)
	got := docProblems(append(workDirs(t, root), "newstore"), d)
	_, layoutLine := section(d.readme, "Layout")
	_, versionsLine := section(d.readme, "Versions")
	_, modulesLine := section(d.design, "Modules")
	want := []string{
		fmt.Sprintf("README.md line %d, section Layout: add a row for the module in newstore/:\n\t| `newstore/` | what it holds (own module) |", layoutLine),
		fmt.Sprintf("README.md line %d, section Versions: add `newstore` to the list of modules released together", versionsLine),
		fmt.Sprintf("docs/design.md line %d, section Modules: add `newstore` to the bullet of the modules that are their own module", modulesLine),
		"docs/releasing.md, first paragraph: add `newstore` to the list of modules released together",
	}
	if len(got) != len(want) {
		t.Fatalf("docProblems with an undocumented module newstore:\n%s\nwant %d problems", strings.Join(got, "\n"), len(want))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("no problem starts with %q; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
	// A Layout row that calls a directory its own module when it is not.
	d.readme = strings.Replace(d.readme, "| `locktest/` | conformance suite", "| `locktest/` | (own module) conformance suite", 1)
	got = docProblems(workDirs(t, root), d)
	if len(got) != 1 || !strings.Contains(got[0], "the row of `locktest/` says \"own module\", but go.work uses no module in locktest") {
		t.Errorf("a row calling locktest/ its own module: %q", got)
	}
}

package main

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// rootPath is the module path of the repository's root module; every
// released module's path starts with it.
const rootPath = "github.com/turnstilelock/turnstile"

// toolsDir is this tool's own module: it is for maintainers, is part of the
// workspace, and is never tagged or required by a released module.
const toolsDir = "tools"

// Module is one module of the repository.
type Module struct {
	Dir  string // slash-separated, relative to the repository root; "." for the root
	Path string // module path
}

// Tag is the git tag that releases m at version: "v1.2.3" for the root
// module, "redis/v1.2.3" for the module in redis/.
func (m Module) Tag(version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// checkVersion accepts a canonical semantic version with the leading v
// (v0.1.0, v1.2.3-rc.1) and refuses anything else with a reason.
func checkVersion(v string) error {
	if v == "" {
		return errors.New("no version given (want a semantic version such as v0.1.0)")
	}
	if !strings.HasPrefix(v, "v") {
		if c := semver.Canonical("v" + v); c != "" {
			return fmt.Errorf("version %q does not start with v (want %s)", v, c)
		}
		return fmt.Errorf("version %q does not start with v (want a semantic version such as v0.1.0)", v)
	}
	if !semver.IsValid(v) {
		return fmt.Errorf("version %q is not a semantic version (want vMAJOR.MINOR.PATCH, e.g. v0.1.0)", v)
	}
	if semver.Canonical(v) != v {
		return fmt.Errorf("version %q is not in canonical form (want %s: three numbers, no build metadata)", v, semver.Canonical(v))
	}
	if semver.Major(v) != "v0" && semver.Major(v) != "v1" {
		return fmt.Errorf("version %q needs module paths ending in /%s, which turnstile's modules do not have", v, semver.Major(v))
	}
	return nil
}

// workspaceModules reads go.work in root and returns the modules it uses,
// except this tool's own, with their module paths from their go.mod files.
func workspaceModules(root string) ([]Module, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, u := range wf.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		if dir == toolsDir {
			continue
		}
		mp, err := modulePath(filepath.Join(root, filepath.FromSlash(dir)))
		if err != nil {
			return nil, err
		}
		want := rootPath
		if dir != "." {
			want = rootPath + "/" + dir
		}
		if mp != want {
			return nil, fmt.Errorf("%s/go.mod declares module %s; a tag %s/vX.Y.Z would release it only under %s", dir, mp, dir, want)
		}
		mods = append(mods, Module{Dir: dir, Path: mp})
	}
	if len(mods) == 0 {
		return nil, errors.New("go.work uses no module")
	}
	return mods, nil
}

func modulePath(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	p := modfile.ModulePath(data)
	if p == "" {
		return "", fmt.Errorf("%s: no module statement", filepath.Join(dir, "go.mod"))
	}
	return p, nil
}

// owner returns the module among mods that provides import path p (the
// longest module path that is p or a prefix of it), or false.
func owner(mods []Module, p string) (Module, bool) {
	var best Module
	found := false
	for _, m := range mods {
		if (p == m.Path || strings.HasPrefix(p, m.Path+"/")) && len(m.Path) > len(best.Path) {
			best, found = m, true
		}
	}
	return best, found
}

// dependencies returns, for each module path, the paths of the sibling
// modules it needs: those its go.mod requires and those its Go files
// (tests included, any build tag) import.
func dependencies(root string, mods []Module) (map[string][]string, error) {
	deps := make(map[string][]string)
	for _, m := range mods {
		set := make(map[string]bool)
		dir := filepath.Join(root, filepath.FromSlash(m.Dir))
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(m.Dir+"/go.mod", data, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			if o, ok := owner(mods, r.Mod.Path); ok && o.Path == r.Mod.Path {
				set[r.Mod.Path] = true
			}
		}
		imports, err := moduleImports(dir)
		if err != nil {
			return nil, err
		}
		for _, imp := range imports {
			if o, ok := owner(mods, imp); ok {
				set[o.Path] = true
			}
		}
		delete(set, m.Path)
		for p := range set {
			deps[m.Path] = append(deps[m.Path], p)
		}
		sort.Strings(deps[m.Path])
	}
	return deps, nil
}

// moduleImports returns the import paths of every .go file under dir that
// belongs to dir's module (nested modules, testdata and vendor excluded).
func moduleImports(dir string) ([]string, error) {
	var out []string
	err := forEachImport(dir, func(_, ip string) { out = append(out, ip) })
	return out, err
}

// forEachImport calls fn with the file and the import path of every import
// of every .go file under dir that belongs to dir's module (nested modules,
// testdata and vendor excluded), tests and every build tag included.
func forEachImport(dir string, fn func(file, importPath string)) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == dir {
				return nil
			}
			name := d.Name()
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, s := range f.Imports {
			ip, err := strconv.Unquote(s.Path.Value)
			if err == nil {
				fn(p, ip)
			}
		}
		return nil
	})
}

// order sorts mods so that every module comes after the modules it depends
// on (ties in the order given), or reports a cycle.
func order(mods []Module, deps map[string][]string) ([]Module, error) {
	byPath := make(map[string]Module, len(mods))
	for _, m := range mods {
		byPath[m.Path] = m
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := make(map[string]int)
	var out []Module
	var stack []string
	var visit func(p string) error
	visit = func(p string) error {
		switch state[p] {
		case done:
			return nil
		case visiting:
			i := 0
			for stack[i] != p {
				i++
			}
			cycle := append(append([]string{}, stack[i:]...), p)
			return fmt.Errorf("module dependency cycle: %s (modules released together must form no cycle: each one's go.sum needs the others' final hashes)", strings.Join(cycle, " -> "))
		}
		state[p] = visiting
		stack = append(stack, p)
		for _, d := range deps[p] {
			if _, ok := byPath[d]; !ok {
				return fmt.Errorf("%s depends on %s, which is not a module of this workspace", p, d)
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[p] = done
		out = append(out, byPath[p])
		return nil
	}
	for _, m := range mods {
		if err := visit(m.Path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// releaseOrder is the workspace's modules in dependency order.
func releaseOrder(root string) ([]Module, error) {
	mods, err := workspaceModules(root)
	if err != nil {
		return nil, err
	}
	deps, err := dependencies(root, mods)
	if err != nil {
		return nil, err
	}
	return order(mods, deps)
}

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// The workspace command lets a module outside the repository build against
// a checkout before the version the checkout's go.mod files require is
// published: the go command looks every required version up in the module
// proxy, so each turnstile module the user's module needs, directly or
// through another (redis requires fence), has to be replaced at that
// version. A go.work does it without touching anything the user publishes.

var (
	// errNotCheckout: the command does not run inside a turnstile checkout.
	errNotCheckout = errors.New("not a turnstile checkout")
	// errNotModule: DIR is not the directory of a Go module.
	errNotModule = errors.New("not a Go module")
	// errNoTurnstile: the module neither imports nor requires turnstile.
	errNoTurnstile = errors.New("uses no turnstile module")
	// errUnknownModule: the module needs a turnstile module the checkout lacks.
	errUnknownModule = errors.New("not a module of the checkout")
	// errTurnstileWorkspace: DIR is, or its workspace uses, a turnstile module.
	errTurnstileWorkspace = errors.New("already a turnstile workspace")
)

// checkoutRoot returns the turnstile checkout that contains dir: the
// nearest directory at or above it whose go.mod declares the root module.
func checkoutRoot(dir string) (string, error) {
	for d := dir; ; {
		if p, err := modulePath(d); err == nil && p == rootPath {
			if _, err := os.Stat(filepath.Join(d, "go.work")); err != nil {
				return "", fmt.Errorf("%w: %s declares module %s but has no go.work", errNotCheckout, d, rootPath)
			}
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("%w: no go.mod declaring module %s in %s or a directory above it (run this from a clone of turnstile)", errNotCheckout, rootPath, dir)
		}
		d = parent
	}
}

// need is a turnstile module the user's module needs, and why.
type need struct {
	Module
	direct bool   // the module imports or requires it itself
	why    string // "imported by main.go", "required by go.mod", "required by …/redis"
}

// userModule is the module in DIR, read and checked.
type userModule struct {
	dir  string // absolute, symbolic links resolved
	path string // module path
	file *modfile.File
	data []byte // its go.mod as read
}

func readUserModule(arg string) (userModule, error) {
	abs, err := filepath.Abs(arg)
	if err != nil {
		return userModule{}, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return userModule{}, fmt.Errorf("%w: %s: no such directory", errNotModule, abs)
	}
	if !info.IsDir() {
		return userModule{}, fmt.Errorf("%w: %s is not a directory (give the directory that holds your module's go.mod)", errNotModule, abs)
	}
	// The go command finds go.work by walking up from the real directory.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	gomod := filepath.Join(abs, "go.mod")
	data, err := os.ReadFile(gomod)
	if os.IsNotExist(err) {
		return userModule{}, fmt.Errorf("%w: %s has no go.mod (run `go mod init MODULE-PATH` there first)", errNotModule, abs)
	}
	if err != nil {
		return userModule{}, err
	}
	f, err := modfile.Parse(gomod, data, nil)
	if err != nil {
		return userModule{}, fmt.Errorf("%w: %v", errNotModule, err)
	}
	if f.Module == nil || f.Module.Mod.Path == "" {
		return userModule{}, fmt.Errorf("%w: %s has no module statement", errNotModule, gomod)
	}
	if isTurnstile(f.Module.Mod.Path) {
		return userModule{}, fmt.Errorf("%w: %s is turnstile's own module %s, which the checkout's go.work already builds", errTurnstileWorkspace, abs, f.Module.Mod.Path)
	}
	return userModule{dir: abs, path: f.Module.Mod.Path, file: f, data: data}, nil
}

// needs returns the turnstile modules u needs, in the order of mods: those
// it imports or requires, and every module those require in turn, as the
// checkout's go.mod files say.
func needs(checkout string, mods []Module, u userModule) ([]need, error) {
	byPath := make(map[string]Module, len(mods))
	for _, m := range mods {
		byPath[m.Path] = m
	}
	why := make(map[string]string)
	direct := make(map[string]bool)
	var queue []string
	add := func(p, reason string) {
		if _, ok := why[p]; !ok {
			why[p] = reason
			queue = append(queue, p)
		}
	}
	var bad error
	err := forEachImport(u.dir, func(file, ip string) {
		if !isTurnstile(ip) || bad != nil {
			return
		}
		rel, _ := filepath.Rel(u.dir, file)
		// The root module's path prefixes every other, so owner finds one
		// for any turnstile path: the package's directory says if it is there.
		o, ok := owner(mods, ip)
		pkgDir := filepath.Join(checkout, filepath.FromSlash(o.Dir), filepath.FromSlash(strings.TrimPrefix(ip, o.Path)))
		if info, err := os.Stat(pkgDir); !ok || err != nil || !info.IsDir() {
			bad = fmt.Errorf("%w: %s imports %s, which no module of the checkout %s provides", errUnknownModule, rel, ip, checkout)
			return
		}
		direct[o.Path] = true
		add(o.Path, "imported by "+filepath.ToSlash(rel))
	})
	if err != nil {
		return nil, err
	}
	if bad != nil {
		return nil, bad
	}
	for _, r := range u.file.Require {
		if !isTurnstile(r.Mod.Path) {
			continue
		}
		if _, ok := byPath[r.Mod.Path]; !ok {
			return nil, fmt.Errorf("%w: %s/go.mod requires %s, which the checkout %s does not have", errUnknownModule, u.dir, r.Mod.Path, checkout)
		}
		direct[r.Mod.Path] = true
		add(r.Mod.Path, "required by go.mod")
	}
	if len(queue) == 0 {
		return nil, fmt.Errorf("%w: %s neither imports a turnstile package nor requires a turnstile module; import one (%s, and a store such as %s/redis) and run this again", errNoTurnstile, u.dir, rootPath, rootPath)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		m := byPath[p]
		data, err := os.ReadFile(filepath.Join(checkout, filepath.FromSlash(m.Dir), "go.mod"))
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(m.Dir+"/go.mod", data, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			if !isTurnstile(r.Mod.Path) {
				continue
			}
			if _, ok := byPath[r.Mod.Path]; !ok {
				return nil, fmt.Errorf("%w: %s/go.mod requires %s, which is not in the checkout's go.work", errUnknownModule, m.Dir, r.Mod.Path)
			}
			add(r.Mod.Path, "required by "+p)
		}
	}
	var out []need
	for _, m := range mods {
		if r, ok := why[m.Path]; ok {
			out = append(out, need{Module: m, direct: direct[m.Path], why: r})
		}
	}
	return out, nil
}

// requireDirect returns u's go.mod with every turnstile module of direct
// required at version (the go command resolves the others through them),
// and one line per change; nil data when nothing changes.
func requireDirect(u userModule, direct []need, version string) ([]byte, []string, error) {
	have := make(map[string]*modfile.Require)
	for _, r := range u.file.Require {
		have[r.Mod.Path] = r
	}
	var changes []string
	var reqs []*modfile.Require
	for _, r := range u.file.Require {
		reqs = append(reqs, &modfile.Require{Mod: r.Mod, Indirect: r.Indirect})
	}
	for _, n := range direct {
		r, ok := have[n.Path]
		switch {
		case !ok:
			reqs = append(reqs, &modfile.Require{Mod: module.Version{Path: n.Path, Version: version}})
			changes = append(changes, fmt.Sprintf("requires %s %s (%s)", n.Path, version, n.why))
		case r.Mod.Version != version:
			for _, q := range reqs {
				if q.Mod.Path == n.Path {
					q.Mod.Version = version
				}
			}
			changes = append(changes, fmt.Sprintf("requires %s %s, the checkout's version (was %s)", n.Path, version, r.Mod.Version))
		}
	}
	if len(changes) == 0 {
		return nil, nil, nil
	}
	u.file.SetRequireSeparateIndirect(reqs)
	u.file.Cleanup()
	out, err := u.file.Format()
	return out, changes, err
}

// setupWorkspace makes the module in dir build against the checkout: its
// go.mod requires the turnstile modules it uses at the checkout's version,
// and a go.work uses it and replaces every turnstile module it needs at that
// version by the checkout's directory. Running it again changes nothing
// unless the module's imports or the checkout changed.
func setupWorkspace(checkout, dir string, out io.Writer) error {
	u, err := readUserModule(dir)
	if err != nil {
		return err
	}
	mods, err := workspaceModules(checkout)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errNotCheckout, checkout, err)
	}
	version, err := currentVersion(checkout, mods)
	if err != nil {
		return err
	}
	ns, err := needs(checkout, mods, u)
	if err != nil {
		return err
	}
	var direct []need
	for _, n := range ns {
		if n.direct {
			direct = append(direct, n)
		}
	}
	work, err := findWork(u.dir, checkout)
	if err != nil {
		return err
	}
	goVersion, err := workGoVersion(checkout, u)
	if err != nil {
		return err
	}
	nextWork, workChanges, err := work.update(ns, checkout, version, goVersion)
	if err != nil {
		return err
	}
	nextMod, modChanges, err := requireDirect(u, direct, version)
	if err != nil {
		return err
	}
	// go.work first: a go.mod requiring an unpublished version without it
	// would break the module's builds.
	gomod := filepath.Join(u.dir, "go.mod")
	if nextWork != nil {
		if err := os.WriteFile(work.file, nextWork, 0o644); err != nil {
			return err
		}
	}
	if nextMod != nil {
		if err := os.WriteFile(gomod, nextMod, 0o644); err != nil {
			return err
		}
	}
	for _, c := range modChanges {
		fmt.Fprintf(out, "%s: %s\n", gomod, c)
	}
	if len(modChanges) == 0 {
		fmt.Fprintf(out, "%s: already requires what it imports from turnstile at %s\n", gomod, version)
	}
	for _, c := range workChanges {
		fmt.Fprintf(out, "%s: %s\n", work.file, c)
	}
	if nextWork == nil {
		fmt.Fprintf(out, "%s: already up to date: %d turnstile modules at %s from %s\n", work.file, len(ns), version, checkout)
	}
	for _, n := range ns {
		fmt.Fprintf(out, "    %s %s => %s (%s)\n", n.Path, version, filepath.Join(checkout, filepath.FromSlash(n.Dir)), n.why)
	}
	if g := os.Getenv("GOWORK"); g != "" && g != work.file {
		fmt.Fprintf(out, "warning: GOWORK=%s is set, so the go command reads that file instead of %s; unset it to build %s\n", g, work.file, u.dir)
	}
	fmt.Fprintf(out, "go build in %s now builds against %s; run this again after importing another turnstile package. %s names directories of this machine: keep it out of version control.\n", u.dir, checkout, filepath.Base(work.file))
	return nil
}

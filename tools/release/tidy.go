package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// currentVersion is the one version at which the modules in mods require
// their turnstile siblings.
func currentVersion(root string, mods []Module) (string, error) {
	seen := make(map[string][]string)
	for _, m := range mods {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod"))
		if err != nil {
			return "", err
		}
		f, err := modfile.Parse(m.Dir+"/go.mod", data, nil)
		if err != nil {
			return "", err
		}
		for _, r := range f.Require {
			if isTurnstile(r.Mod.Path) {
				seen[r.Mod.Version] = append(seen[r.Mod.Version], m.Dir)
			}
		}
	}
	if len(seen) != 1 {
		var vs []string
		for v := range seen {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		return "", fmt.Errorf("the modules require turnstile modules at %d versions (%s); all must be at one", len(vs), strings.Join(vs, ", "))
	}
	for v := range seen {
		return v, nil
	}
	return "", nil
}

// tidy runs `go mod tidy` in every module the way a release does, with the
// siblings served at the version they are required at from a temporary
// local proxy built from the working tree. The go.sum lines of turnstile
// modules are left as they were: the release writes them, from the tagged
// content, and the workspace does not need them.
func tidy(root string, out io.Writer) error {
	mods, err := releaseOrder(root)
	if err != nil {
		return err
	}
	version, err := currentVersion(root, mods)
	if err != nil {
		return err
	}
	proxyDir, err := os.MkdirTemp("", "turnstile-tidy-proxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(proxyDir)
	modcache, cleanup, err := newModCache()
	if err != nil {
		return err
	}
	defer cleanup()
	env := proxyEnv(proxyDir, modcache)
	for _, m := range mods {
		gosum := filepath.Join(root, filepath.FromSlash(m.Dir), "go.sum")
		old, _ := os.ReadFile(gosum)
		if err := prepareModule(root, m, mods, version, env); err != nil {
			return err
		}
		if err := addToProxy(root, proxyDir, m, version); err != nil {
			return err
		}
		tidied, err := os.ReadFile(gosum)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		merged := dropTurnstileSums(tidied)
		var keep []string
		for _, line := range turnstileSums(old) {
			if v := strings.Fields(line)[1]; strings.TrimSuffix(v, "/go.mod") == version {
				keep = append(keep, line)
			}
		}
		if len(keep) > 0 {
			merged = []byte(sortedSum(string(merged) + strings.Join(keep, "\n") + "\n"))
		}
		if len(merged) == 0 {
			if err := os.Remove(gosum); err != nil && !os.IsNotExist(err) {
				return err
			}
		} else if err := os.WriteFile(gosum, merged, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "tidied %s\n", m.Dir)
	}
	return nil
}

// sortedSum sorts go.sum lines the way the go command writes them.
func sortedSum(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// setVersion rewrites every module's go.mod so that it requires its
// turnstile siblings at version and replaces none of them.
func setVersion(root, version string, out io.Writer) error {
	mods, err := workspaceModules(root)
	if err != nil {
		return err
	}
	for _, m := range mods {
		file := filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod")
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		next, err := setRequires(m.Dir+"/go.mod", data, mods, version)
		if err != nil {
			return err
		}
		if string(next) != string(data) {
			if err := os.WriteFile(file, next, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s/go.mod: turnstile modules required at %s\n", m.Dir, version)
		}
	}
	file := filepath.Join(root, "go.work")
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	next, err := setWorkReplaces(data, mods, version)
	if err != nil {
		return err
	}
	if string(next) != string(data) {
		if err := os.WriteFile(file, next, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "go.work: every module at %s replaced by its directory\n", version)
	}
	return nil
}

// setWorkReplaces rewrites data, a go.work, so that it replaces each module
// of mods at version by its directory, and no other version of one. The go
// command reads the go.mod of every required version of a workspace module
// even in workspace mode, so without these a version that is not published
// yet (the one being prepared) breaks every build in the workspace. They
// are in go.work only: no go.mod a user builds carries a replace.
func setWorkReplaces(data []byte, mods []Module, version string) ([]byte, error) {
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	for _, r := range append([]*modfile.Replace{}, wf.Replace...) {
		if isTurnstile(r.Old.Path) {
			if err := wf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return nil, err
			}
		}
	}
	wf.Cleanup()
	var b strings.Builder
	b.Write(bytes.TrimRight(modfile.Format(wf.Syntax), "\n"))
	b.WriteString("\n\n// Every turnstile module at the version the go.mod files require is the\n")
	b.WriteString("// workspace's copy, published or not (scripts/release.sh keeps this list).\n")
	b.WriteString("replace (\n")
	for _, m := range mods {
		dir := "./" + m.Dir
		if m.Dir == "." {
			dir = "./"
		}
		fmt.Fprintf(&b, "\t%s %s => %s\n", m.Path, version, dir)
	}
	b.WriteString(")\n")
	// Parse what was written, so that a mistake here is an error, not a
	// go.work the go command refuses.
	if _, err := modfile.ParseWork("go.work", []byte(b.String()), nil); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// checkGraph verifies the module graph of the working tree: every go.mod
// requires its turnstile siblings at one version and has no replace
// directive for one, and go.work replaces each module at that version by
// its directory.
func checkGraph(root string, out io.Writer) error {
	mods, err := workspaceModules(root)
	if err != nil {
		return err
	}
	version, err := currentVersion(root, mods)
	if err != nil {
		return fmt.Errorf("%v (go run ./tools/release set-version VERSION sets them all)", err)
	}
	for _, m := range mods {
		if err := checkReleased(m.Dir+"/go.mod", filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod"), version); err != nil {
			return fmt.Errorf("%v (go run ./tools/release set-version %s fixes it)", err, version)
		}
	}
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return err
	}
	replaced := make(map[string]string)
	for _, r := range wf.Replace {
		if isTurnstile(r.Old.Path) {
			replaced[r.Old.Path+"@"+r.Old.Version] = path.Clean(r.New.Path)
		}
	}
	for _, m := range mods {
		if dir, ok := replaced[m.Path+"@"+version]; !ok || dir != path.Clean("./"+m.Dir) {
			return fmt.Errorf("go.work does not replace every module at %s by its directory: %s@%s is not replaced by ./%s (go run ./tools/release set-version %s fixes it)", version, m.Path, version, m.Dir, version)
		}
		delete(replaced, m.Path+"@"+version)
	}
	for mv := range replaced {
		return fmt.Errorf("go.work replaces %s, which no go.mod requires (go run ./tools/release set-version %s fixes it)", mv, version)
	}
	if _, err := releaseOrder(root); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d modules, each requiring its turnstile siblings at %s, none replaced\n", len(mods), version)
	return nil
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// workTarget is the go.work the workspace command writes for a module.
type workTarget struct {
	file    string // absolute
	data    []byte // its content; nil for a new file
	addUse  string // the use line to add ("." for the module's own go.work), "" if it has one
	shadows string // a go.work above the module that does not use it, which the new file hides
}

// findWork picks the go.work for the module in dir, in the order least
// likely to surprise: the module's own go.work if it has one; else the
// nearest go.work above it if that one already uses it (the user's
// workspace); else a new go.work in dir, which affects builds in dir alone.
// A go.work that uses a turnstile module is refused: it is the checkout's
// own or one made by hand, and replacing its modules would fight its uses.
func findWork(dir, checkout string) (workTarget, error) {
	own := filepath.Join(dir, "go.work")
	if data, err := os.ReadFile(own); err == nil {
		t := workTarget{file: own, data: data}
		uses, err := workUses(own, data)
		if err != nil {
			return workTarget{}, err
		}
		if !uses[dir] {
			t.addUse = "."
		}
		return t, checkUses(own, uses)
	} else if !os.IsNotExist(err) {
		return workTarget{}, err
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		file := filepath.Join(d, "go.work")
		if data, err := os.ReadFile(file); err == nil {
			uses, err := workUses(file, data)
			if err != nil {
				return workTarget{}, err
			}
			if !uses[dir] {
				return workTarget{file: own, addUse: ".", shadows: file}, nil
			}
			return workTarget{file: file, data: data}, checkUses(file, uses)
		}
		if filepath.Dir(d) == d {
			return workTarget{file: own, addUse: "."}, nil
		}
	}
}

// workUses returns the directories a go.work uses, absolute and with
// symbolic links resolved.
func workUses(file string, data []byte) (map[string]bool, error) {
	wf, err := modfile.ParseWork(file, data, nil)
	if err != nil {
		return nil, err
	}
	uses := make(map[string]bool)
	for _, u := range wf.Use {
		p := filepath.FromSlash(u.Path)
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(file), p)
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		uses[filepath.Clean(p)] = true
	}
	return uses, nil
}

func checkUses(file string, uses map[string]bool) error {
	for dir := range uses {
		if p, err := modulePath(dir); err == nil && isTurnstile(p) {
			return fmt.Errorf("%w: %s uses turnstile's module %s (%s) itself; remove that use line, or work in the checkout's own workspace", errTurnstileWorkspace, file, p, dir)
		}
	}
	return nil
}

// workGoVersion is the go line of a new go.work: the newer of the user's
// module's and the checkout's workspace's, since a go.work may not be older
// than a module it uses.
func workGoVersion(checkout string, u userModule) (string, error) {
	data, err := os.ReadFile(filepath.Join(checkout, "go.work"))
	if err != nil {
		return "", err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return "", err
	}
	v := ""
	if wf.Go != nil {
		v = wf.Go.Version
	}
	if u.file.Go != nil && semver.Compare("v"+u.file.Go.Version, "v"+v) > 0 {
		v = u.file.Go.Version
	}
	if v == "" {
		return "", fmt.Errorf("%s/go.work has no go line", checkout)
	}
	return v, nil
}

// update returns the target's content with its use of the module and a
// replace, at version, of each module of ns by its directory in the
// checkout, every other replace of a turnstile module dropped; and one line
// per change. It returns nil content when the file is already so.
func (t workTarget) update(ns []need, checkout, version, goVersion string) ([]byte, []string, error) {
	wf, err := modfile.ParseWork(t.file, t.data, nil)
	if err != nil {
		return nil, nil, err
	}
	var changes []string
	if t.data == nil {
		changes = append(changes, "new workspace, for builds in "+filepath.Dir(t.file))
		if t.shadows != "" {
			changes = append(changes, fmt.Sprintf("it hides %s above, which does not use %s", t.shadows, filepath.Dir(t.file)))
		}
	}
	if wf.Go == nil {
		if err := wf.AddGoStmt(goVersion); err != nil {
			return nil, nil, err
		}
	}
	if t.addUse != "" {
		if err := wf.AddUse(t.addUse, ""); err != nil {
			return nil, nil, err
		}
		changes = append(changes, "use "+t.addUse)
	}
	want := make(map[string]string) // "path version" -> directory
	for _, n := range ns {
		want[n.Path+" "+version] = filepath.Join(checkout, filepath.FromSlash(n.Dir))
	}
	same := len(changes) == 0
	found := 0
	for _, r := range append([]*modfile.Replace{}, wf.Replace...) {
		if !isTurnstile(r.Old.Path) {
			continue
		}
		key := r.Old.Path + " " + r.Old.Version
		if dir, ok := want[key]; ok && r.New.Version == "" && filepath.Clean(filepath.FromSlash(r.New.Path)) == dir {
			found++
		} else {
			same = false
			changes = append(changes, fmt.Sprintf("drops replace %s => %s", strings.TrimSpace(key), strings.TrimSpace(r.New.Path+" "+r.New.Version)))
		}
		if err := wf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			return nil, nil, err
		}
	}
	if same && found == len(want) {
		return nil, nil, nil
	}
	changes = append(changes, fmt.Sprintf("replaces %d turnstile modules at %s by the checkout's directories", len(ns), version))
	wf.Cleanup()
	var b strings.Builder
	b.Write(bytes.TrimRight(modfile.Format(wf.Syntax), "\n"))
	b.WriteString("\n\n// turnstile modules at the version the checkout's go.mod files require,\n")
	b.WriteString("// which need not be published yet, from the checkout's directories\n")
	b.WriteString("// (written by `go run ./tools/release workspace` in " + checkout + ").\n")
	b.WriteString("replace (\n")
	for _, n := range ns {
		fmt.Fprintf(&b, "\t%s %s => %s\n", n.Path, version, modfile.AutoQuote(want[n.Path+" "+version]))
	}
	b.WriteString(")\n")
	// Parse what was written, so that a mistake here is an error, not a
	// go.work the go command refuses.
	if _, err := modfile.ParseWork(t.file, []byte(b.String()), nil); err != nil {
		return nil, nil, err
	}
	return []byte(b.String()), changes, nil
}

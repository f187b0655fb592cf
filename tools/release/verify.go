package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// gitShow returns the content of file at rev, or false if it is not there.
func gitShow(root, rev, file string) ([]byte, bool) {
	cmd := exec.Command("git", "show", rev+":"+file)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, false
	}
	return out, true
}

// vcsZipHash builds m's zip at the tag the way the go command does when it
// fetches a version from git, and returns its go.sum hash.
func vcsZipHash(root string, m Module, tag, tmp string) (string, error) {
	f, err := os.CreateTemp(tmp, "vcs-*.zip")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	subdir := ""
	if m.Dir != "." {
		subdir = m.Dir
	}
	mv := module.Version{Path: m.Path, Version: strings.TrimPrefix(tag, m.Dir+"/")}
	if err := zip.CreateFromVCS(f, mv, root, tag, subdir); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return zipHash(f.Name())
}

func goModHash(data []byte) (string, error) {
	return dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

// verifyTags checks the release of version in the repository at root: each
// module's tag exists; its go.mod there requires turnstile modules only at
// version and replaces none; the zip git makes of it at the tag hashes
// like the one in the local proxy; and every go.sum line for it in the
// tagged modules is that hash (and its go.mod's).
func verifyTags(root, proxyDir, version string, out io.Writer) error {
	mods, err := releaseOrder(root)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "turnstile-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	want := make(map[string]string) // "path version" and "path version/go.mod" -> hash
	for _, m := range mods {
		tag := m.Tag(version)
		gomodFile := "go.mod"
		if m.Dir != "." {
			gomodFile = m.Dir + "/go.mod"
		}
		gomod, ok := gitShow(root, tag, gomodFile)
		if !ok {
			return fmt.Errorf("tag %s: no %s (is the tag there?)", tag, gomodFile)
		}
		name := filepath.Join(tmp, "go.mod")
		if err := os.WriteFile(name, gomod, 0o644); err != nil {
			return err
		}
		if err := checkReleased(tag+":"+gomodFile, name, version); err != nil {
			return err
		}
		vcs, err := vcsZipHash(root, m, tag, tmp)
		if err != nil {
			return err
		}
		esc, _ := module.EscapePath(m.Path)
		proxied, err := zipHash(filepath.Join(proxyDir, filepath.FromSlash(esc), "@v", version+".zip"))
		if err != nil {
			return err
		}
		if vcs != proxied {
			return fmt.Errorf("%s@%s: the zip git makes at tag %s hashes %s, the local proxy's %s: the release commit holds other files than the proxy was built from", m.Path, version, tag, vcs, proxied)
		}
		modHash, err := goModHash(gomod)
		if err != nil {
			return err
		}
		want[m.Path+" "+version] = vcs
		want[m.Path+" "+version+"/go.mod"] = modHash
		// The go.sum of this module at its tag names only modules tagged
		// before it, whose hashes are known by now.
		sumFile := "go.sum"
		if m.Dir != "." {
			sumFile = m.Dir + "/go.sum"
		}
		sum, _ := gitShow(root, tag, sumFile)
		n := 0
		for _, line := range turnstileSums(sum) {
			f := strings.Fields(line)
			h, ok := want[f[0]+" "+f[1]]
			if !ok {
				return fmt.Errorf("%s at %s: %q names a version that is not part of this release", sumFile, tag, line)
			}
			if h != f[2] {
				return fmt.Errorf("%s at %s: %s %s is %s, but the tagged module hashes %s", sumFile, tag, f[0], f[1], f[2], h)
			}
			n++
		}
		fmt.Fprintf(out, "%-28s %s, %d sibling go.sum lines checked\n", tag, vcs, n)
	}
	return nil
}

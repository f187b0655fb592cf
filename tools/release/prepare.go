package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// setRequires rewrites data, a go.mod, so that every requirement of a
// turnstile module is at version and no replace directive names one. It
// refuses a requirement of a turnstile module that is not in mods.
func setRequires(name string, data []byte, mods []Module, version string) ([]byte, error) {
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, r := range f.Require {
		if !isTurnstile(r.Mod.Path) {
			continue
		}
		if o, ok := owner(mods, r.Mod.Path); !ok || o.Path != r.Mod.Path {
			return nil, fmt.Errorf("%s requires %s, which is not a module of this workspace", name, r.Mod.Path)
		}
		if r.Mod.Version != version {
			stale = append(stale, r.Mod.Path)
		}
	}
	for _, p := range stale {
		if err := f.AddRequire(p, version); err != nil {
			return nil, err
		}
	}
	for _, r := range append([]*modfile.Replace{}, f.Replace...) {
		if isTurnstile(r.Old.Path) {
			if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return nil, err
			}
		}
	}
	f.Cleanup()
	return f.Format()
}

func isTurnstile(p string) bool {
	return p == rootPath || strings.HasPrefix(p, rootPath+"/")
}

// dropTurnstileSums returns data, a go.sum, without the lines of turnstile
// modules; the release writes those from the modules it zips.
func dropTurnstileSums(data []byte) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) > 0 && isTurnstile(fields[0]) {
			continue
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// turnstileSums returns the go.sum lines of turnstile modules in data.
func turnstileSums(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) == 3 && isTurnstile(fields[0]) {
			out = append(out, line)
		}
	}
	return out
}

// proxyEnv is the environment for the go commands that resolve turnstile
// modules from the local proxy in proxyDir: no workspace, go.mod and go.sum
// updated as needed, the module cache in modcache (a private one, so that
// no module cache entry of an unpublished version, left by an earlier run,
// stands in for the proxy's), the local proxy first in GOPROXY, then the
// user's module cache's download directory (offline for everything already
// downloaded), then the public proxy; turnstile modules are not looked up in
// the checksum database, which has never seen these versions.
func proxyEnv(proxyDir, modcache string, extra ...string) []string {
	goproxy := "file://" + filepath.ToSlash(proxyDir)
	if user := goEnv("GOMODCACHE"); user != "" {
		goproxy += ",file://" + filepath.ToSlash(filepath.Join(user, "cache", "download"))
	}
	goproxy += ",https://proxy.golang.org"
	env := append(os.Environ(),
		"GOWORK=off",
		// -trimpath: packages built from a fresh module cache are the
		// same build actions as from the user's, so the build cache
		// serves them again on the next run.
		"GOFLAGS=-mod=mod -trimpath",
		"GOMODCACHE="+modcache,
		"GOPROXY="+goproxy,
		"GONOSUMDB="+rootPath,
		"GONOPROXY=",
		"GOPRIVATE=",
		"GOTOOLCHAIN=local",
	)
	return append(env, extra...)
}

// newModCache makes an empty module cache and returns it with the function
// that removes it (its files are read-only; the go command removes them).
func newModCache() (string, func(), error) {
	dir, err := os.MkdirTemp("", "turnstile-modcache-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() {
		cmd := exec.Command("go", "clean", "-modcache")
		cmd.Env = append(os.Environ(), "GOMODCACHE="+dir, "GOWORK=off", "GOFLAGS=")
		cmd.Dir = dir
		_ = cmd.Run()
		os.RemoveAll(dir)
	}, nil
}

func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// run runs name args in dir with env, and returns an error carrying its
// combined output if it fails.
func run(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, bytes.TrimSpace(out))
	}
	return nil
}

// prepare puts the repository in root into the release state for version:
// go.work replaces every module at version by its directory, and, in
// dependency order, each module's turnstile requirements are set to
// version (replace directives for them dropped), `go mod tidy` runs
// against the local proxy in proxyDir (which writes the go.sum lines of the
// siblings already zipped), and the module is then zipped into proxyDir at
// version. The zips hold what git tracks in each module's directory, so
// after the release commit their hashes are the ones the Go module proxy
// computes from the tags. progress, if not nil, gets one line per module.
func prepare(root, proxyDir, version string, progress io.Writer) ([]Module, error) {
	mods, err := releaseOrder(root)
	if err != nil {
		return nil, err
	}
	// go.work is a file of the root module, so it is final before any zip.
	work := filepath.Join(root, "go.work")
	data, err := os.ReadFile(work)
	if err != nil {
		return nil, err
	}
	next, err := setWorkReplaces(data, mods, version)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(work, next, 0o644); err != nil {
		return nil, err
	}
	modcache, cleanup, err := newModCache()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	env := proxyEnv(proxyDir, modcache)
	for _, m := range mods {
		start := time.Now()
		if err := prepareModule(root, m, mods, version, env); err != nil {
			return nil, err
		}
		if err := addToProxy(root, proxyDir, m, version); err != nil {
			return nil, err
		}
		if progress != nil {
			fmt.Fprintf(progress, "%-40s tidy and zip %.1fs\n", m.Path+"@"+version, time.Since(start).Seconds())
		}
	}
	return mods, nil
}

func prepareModule(root string, m Module, mods []Module, version string, env []string) error {
	dir := filepath.Join(root, filepath.FromSlash(m.Dir))
	gomod := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		return err
	}
	out, err := setRequires(m.Dir+"/go.mod", data, mods, version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(gomod, out, 0o644); err != nil {
		return err
	}
	gosum := filepath.Join(dir, "go.sum")
	if sum, err := os.ReadFile(gosum); err == nil {
		if err := os.WriteFile(gosum, dropTurnstileSums(sum), 0o644); err != nil {
			return err
		}
	}
	if err := run(dir, env, "go", "mod", "tidy"); err != nil {
		return err
	}
	return checkReleased(m.Dir+"/go.mod", gomod, version)
}

// checkReleased verifies that the go.mod at file requires turnstile modules
// only at version and replaces none.
func checkReleased(name, file, version string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return err
	}
	for _, r := range f.Require {
		if isTurnstile(r.Mod.Path) && r.Mod.Version != version {
			return fmt.Errorf("%s: requires %s %s, want %s", name, r.Mod.Path, r.Mod.Version, version)
		}
	}
	for _, r := range f.Replace {
		if isTurnstile(r.Old.Path) {
			return fmt.Errorf("%s: replaces %s: a module with a replace directive for a turnstile module cannot be installed with go install", name, r.Old.Path)
		}
	}
	return nil
}

// moduleFiles lists the files of module m as they will be in its zip:
// what git tracks (or would add) in its directory, read from the working
// tree, without files of nested modules; a nested module without a LICENSE
// gets the root's, as the go command does when it fetches one from git.
func moduleFiles(root string, m Module) ([]zip.File, error) {
	args := []string{"ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."}
	cmd := exec.Command("git", args...)
	cmd.Dir = filepath.Join(root, filepath.FromSlash(m.Dir))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %v", m.Dir, err)
	}
	var files []zip.File
	haveLicense := false
	seen := make(map[string]bool)
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		full := filepath.Join(root, filepath.FromSlash(m.Dir), filepath.FromSlash(name))
		info, err := os.Lstat(full)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return nil, err
		}
		files = append(files, diskFile{path: name, file: full, info: info})
		if name == "LICENSE" {
			haveLicense = true
		}
	}
	if m.Dir != "." && !haveLicense {
		full := filepath.Join(root, "LICENSE")
		if info, err := os.Lstat(full); err == nil {
			files = append(files, diskFile{path: "LICENSE", file: full, info: info})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path() < files[j].Path() })
	return files, nil
}

type diskFile struct {
	path string // slash-separated, relative to the module root
	file string
	info os.FileInfo
}

func (f diskFile) Path() string                { return f.path }
func (f diskFile) Lstat() (os.FileInfo, error) { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) {
	return os.Open(f.file)
}

// addToProxy writes m at version into the file-system module proxy in
// proxyDir: list, .info, .mod and .zip, as GOPROXY=file://proxyDir expects.
func addToProxy(root, proxyDir string, m Module, version string) error {
	files, err := moduleFiles(root, m)
	if err != nil {
		return err
	}
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(proxyDir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mv := module.Version{Path: m.Path, Version: version}
	var buf bytes.Buffer
	if err := zip.Create(&buf, mv, files); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".zip"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o644); err != nil {
		return err
	}
	list, _ := os.ReadFile(filepath.Join(dir, "list"))
	for _, v := range strings.Fields(string(list)) {
		if v == version {
			return nil
		}
	}
	return os.WriteFile(filepath.Join(dir, "list"), append(list, []byte(version+"\n")...), 0o644)
}

// zipHash is the go.sum hash (h1:) of the module zip at file.
func zipHash(file string) (string, error) {
	return dirhash.HashZip(file, dirhash.Hash1)
}

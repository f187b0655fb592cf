// Command release prepares, checks and proves a release of turnstile's
// modules. Every module of the workspace (go.work) is released together at
// one version; scripts/release.sh drives it.
//
//	release check-version VERSION   exit 0 for a valid release version, 64 with the reason otherwise
//	release order                   the modules in dependency order: directory and module path
//	release tags VERSION            the tags that release VERSION, in dependency order
//	release prepare -proxy DIR VERSION
//	                                the release state: every turnstile requirement at VERSION, no
//	                                replace for one, go.sum written by `go mod tidy` against the
//	                                local proxy DIR, into which each module is zipped once final
//	release verify-tags -proxy DIR VERSION
//	                                each tag's tree: requirements at VERSION, no replace, and its
//	                                module zip as git makes it hashes like the zip in DIR and the
//	                                go.sum lines of the modules that require it
//	release set-version VERSION     every turnstile requirement at VERSION and no replace for one,
//	                                go.sum untouched (the release, or tidy, writes it)
//	release tidy                    `go mod tidy` in every module, siblings served from the working
//	                                tree through a temporary local proxy; turnstile go.sum lines kept
//	release check                   every go.mod requires turnstile modules at one version and
//	                                replaces none; go.work replaces each at that version
//	release install-check [VERSION] the proof that users can install: scripts/release.sh on a copy
//	                                of the working tree, then `go install …/cmd/turnstile@VERSION`
//	                                and a fresh module using the README's program, both from the
//	                                local proxy with an empty module cache; VERSION defaults
//	                                to the one the go.mod files require
//	release workspace DIR           make the module in DIR (a directory with a go.mod, outside
//	                                this checkout) build against this checkout: a go.work in DIR
//	                                (or the workspace above DIR that uses it) uses DIR and replaces
//	                                every turnstile module DIR needs, directly or through another,
//	                                at the version the go.mod files require, by the checkout's
//	                                directory; DIR's go.mod requires what it imports at that
//	                                version. Running it again changes nothing
//
// Every command works on the repository that contains the current directory.
// Only workspace writes outside it (DIR's go.mod and go.work), and it needs
// no git: a checkout is the nearest directory with the root module's go.mod.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const usage = `usage: release check-version VERSION
       release order
       release tags VERSION
       release prepare -proxy DIR VERSION
       release verify-tags -proxy DIR VERSION
       release set-version VERSION
       release tidy
       release check
       release install-check [-keep] [VERSION]
       release workspace DIR`

// exitUsage is the exit status for bad arguments (sysexits EX_USAGE).
const exitUsage = 64

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	err := runMain(os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "release:", err)
	var ue usageError
	if errors.As(err, &ue) {
		os.Exit(exitUsage)
	}
	os.Exit(1)
}

func runMain(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command\n" + usage}
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	proxy := fs.String("proxy", "", "directory of the file-system module proxy")
	keep := fs.Bool("keep", false, "keep the temporary directory")
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Sprintf("%s: %v", cmd, err)}
	}
	version := ""
	switch cmd {
	case "install-check":
		if fs.NArg() > 1 {
			return usageError{fmt.Sprintf("%s takes at most one VERSION argument, got %d", cmd, fs.NArg())}
		}
		version = fs.Arg(0)
		if version != "" {
			if err := checkVersion(version); err != nil {
				return usageError{err.Error()}
			}
		}
	case "check-version", "set-version", "tags", "prepare", "verify-tags":
		if fs.NArg() != 1 {
			return usageError{fmt.Sprintf("%s takes one VERSION argument, got %d", cmd, fs.NArg())}
		}
		version = fs.Arg(0)
		if err := checkVersion(version); err != nil {
			return usageError{err.Error()}
		}
	case "workspace":
		if fs.NArg() != 1 {
			return usageError{fmt.Sprintf("workspace takes one DIR argument, the directory of your module's go.mod, got %d", fs.NArg())}
		}
	case "order", "tidy", "check":
		if fs.NArg() != 0 {
			return usageError{fmt.Sprintf("%s takes no arguments", cmd)}
		}
	default:
		return usageError{fmt.Sprintf("unknown command %q\n%s", cmd, usage)}
	}
	if (cmd == "prepare" || cmd == "verify-tags") && *proxy == "" {
		return usageError{cmd + " needs -proxy DIR"}
	}
	if cmd == "check-version" {
		return nil
	}
	if cmd == "workspace" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		checkout, err := checkoutRoot(wd)
		if err != nil {
			return err
		}
		return setupWorkspace(checkout, fs.Arg(0), stdout)
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	switch cmd {
	case "order":
		mods, err := releaseOrder(root)
		if err != nil {
			return err
		}
		for _, m := range mods {
			fmt.Fprintf(stdout, "%s %s\n", m.Dir, m.Path)
		}
	case "tags":
		mods, err := releaseOrder(root)
		if err != nil {
			return err
		}
		for _, m := range mods {
			fmt.Fprintln(stdout, m.Tag(version))
		}
	case "prepare":
		p, err := filepath.Abs(*proxy)
		if err != nil {
			return err
		}
		_, err = prepare(root, p, version, stdout)
		return err
	case "verify-tags":
		p, err := filepath.Abs(*proxy)
		if err != nil {
			return err
		}
		return verifyTags(root, p, version, stdout)
	case "set-version":
		return setVersion(root, version, stdout)
	case "tidy":
		return tidy(root, stdout)
	case "check":
		return checkGraph(root, stdout)
	case "install-check":
		if version == "" {
			mods, err := workspaceModules(root)
			if err != nil {
				return err
			}
			if version, err = currentVersion(root, mods); err != nil {
				return err
			}
		}
		return installCheck(root, version, *keep, stdout)
	}
	return nil
}

// repoRoot is the top of the git work tree containing the current directory.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", errors.New("not inside a git work tree")
	}
	return strings.TrimSpace(string(out)), nil
}

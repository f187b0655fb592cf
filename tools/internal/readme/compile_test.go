package readme

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// repoRoot is the repository's top directory, from this package's.
const repoRoot = "../../.."

// The README's Go blocks are compiled in a module of a temporary workspace
// that uses every module of the repository's workspace, so they can import
// any turnstile package and any third-party package the repository's
// modules require. Each block is its own package main:
//
//   - a block that starts with a package clause is a whole file, compiled
//     as it is;
//   - any other block is a fragment: its import declarations, if any, stay
//     file-level, and the rest becomes the body of a function. Names it uses
//     without declaring come from readmeEnv below (ctx, c, key, lease, ...);
//     packages it uses without importing them come from readmeImports;
//     every variable it declares at the top level of that body is used
//     once more after it, since a fragment often only shows a value.
//
// A block that fails to compile fails the test with the README line.

// readmeEnv declares the names the README's fragments take as given.
const readmeEnv = `package main

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

var (
	ctx           context.Context
	c             *turnstile.Client
	key           string
	lease         *turnstile.Lease
	backend       driver.Backend
	rueidisClient rueidis.Client
	client        rueidis.Client
	pool          *pgxpool.Pool
	requestID     string
	charge        func(ctx context.Context) ([]byte, error)
)

func main() {}
`

// readmeImports maps the package names fragments use to their import paths.
var readmeImports = map[string]string{
	"context":     "context",
	"errors":      "errors",
	"fmt":         "fmt",
	"log":         "log",
	"time":        "time",
	"turnstile":   "github.com/turnstilelock/turnstile",
	"redis":       "github.com/turnstilelock/turnstile/redis",
	"fence":       "github.com/turnstilelock/turnstile/fence",
	"idempotency": "github.com/turnstilelock/turnstile/idempotency",
	"stock":       "github.com/turnstilelock/turnstile/stock",
	"claim":       "github.com/turnstilelock/turnstile/claim",
	"consume":     "github.com/turnstilelock/turnstile/events/consume",
	"metrics":     "github.com/turnstilelock/turnstile/metrics",
	"events":      "github.com/turnstilelock/turnstile/events",
	"outbox":      "github.com/turnstilelock/turnstile/events/outbox",
	"admission":   "github.com/turnstilelock/turnstile/admission",
	"pgx":         "github.com/jackc/pgx/v5",
	"prometheus":  "github.com/prometheus/client_golang/prometheus",
}

// wrapFragment turns a fragment, which starts at README line line, into a
// compilable file of package main. The fragment's text is kept as it is,
// under //line directives, so that errors name README lines.
func wrapFragment(code string, line int) (string, error) {
	// Split off leading import declarations.
	var imports, body strings.Builder
	lines := strings.SplitAfter(code, "\n")
	i := 0
	for i < len(lines) {
		t := strings.TrimSpace(lines[i])
		if strings.HasPrefix(t, "import (") {
			for i < len(lines) {
				imports.WriteString(lines[i])
				done := strings.TrimSpace(lines[i]) == ")"
				i++
				if done {
					break
				}
			}
			continue
		}
		if strings.HasPrefix(t, "import ") || (imports.Len() > 0 && (t == "" || strings.HasPrefix(t, "//"))) {
			imports.WriteString(lines[i])
			i++
			continue
		}
		break
	}
	bodyLine := line + i
	for ; i < len(lines); i++ {
		body.WriteString(lines[i])
	}

	src := "package main\n\n" + imports.String() + "\nfunc readmeBlock() {\n" + body.String() + "\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "fragment.go", src, 0)
	if err != nil {
		return "", fmt.Errorf("as a function body: %v", err)
	}
	fn := f.Decls[len(f.Decls)-1].(*ast.FuncDecl)

	// Names the fragment declares at its top level, and the package
	// names it uses without importing them.
	declared := map[string]bool{}
	var order []string
	for _, st := range fn.Body.List {
		if as, ok := st.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" && !declared[id.Name] {
					declared[id.Name] = true
					order = append(order, id.Name)
				}
			}
		}
	}
	have := map[string]bool{}
	for _, imp := range f.Imports {
		p := strings.Trim(imp.Path.Value, `"`)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		have[name] = true
		if strings.HasSuffix(p, "/v5") {
			have["pgx"] = true
		}
	}
	need := map[string]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && !declared[id.Name] && !have[id.Name] {
				if _, ok := readmeImports[id.Name]; ok {
					need[id.Name] = true
				}
			}
		}
		return true
	})
	var names []string
	for n := range need {
		names = append(names, n)
	}
	sort.Strings(names)

	var out strings.Builder
	out.WriteString("package main\n\n")
	for _, n := range names {
		fmt.Fprintf(&out, "import %q\n", readmeImports[n])
	}
	if imports.Len() > 0 {
		fmt.Fprintf(&out, "\n//line README.md:%d\n%s", line, imports.String())
	}
	fmt.Fprintf(&out, "\nfunc readmeBlock() {\n//line README.md:%d\n%s\n", bodyLine, body.String())
	for _, name := range order {
		fmt.Fprintf(&out, "\t_ = %s\n", name)
	}
	out.WriteString("}\n")
	return out.String(), nil
}

// workspace writes a go.work in dir that uses dir/app and every module and
// replacement of the repository's go.work, with absolute directories.
func workspace(t *testing.T, dir string) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "go %s\n\nuse (\n\t./app\n", wf.Go.Version)
	for _, u := range wf.Use {
		fmt.Fprintf(&b, "\t%s\n", filepath.Join(root, u.Path))
	}
	b.WriteString(")\n")
	for _, r := range wf.Replace {
		newPath := r.New.Path
		if modfile.IsDirectoryPath(newPath) && !filepath.IsAbs(newPath) {
			newPath = filepath.Join(root, newPath)
		}
		fmt.Fprintf(&b, "replace %s %s => %s %s\n", r.Old.Path, r.Old.Version, newPath, r.New.Version)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.work"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The checksums of the modules only the workspace's whole graph names,
	// so that a go.mod the module cache lacks can be fetched and checked.
	sums, err := os.ReadFile(filepath.Join(root, "go.work.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.work.sum"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := fmt.Sprintf("module example.com/readmecheck\n\ngo %s\n", wf.Go.Version)
	if err := os.WriteFile(filepath.Join(dir, "app", "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compileBlocks builds every block, each as its own package of a module in
// a temporary workspace, and returns go vet's report with each error
// at its README line.
func compileBlocks(t *testing.T, blocks []Block) (string, error) {
	t.Helper()
	dir := t.TempDir()
	workspace(t, dir)
	for _, b := range blocks {
		pkg := fmt.Sprintf("line%d", b.Line)
		pdir := filepath.Join(dir, "app", pkg)
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		src := fmt.Sprintf("//line README.md:%d\n%s", b.Line, b.Code)
		if !strings.HasPrefix(strings.TrimSpace(b.Code), "package ") {
			var err error
			src, err = wrapFragment(b.Code, b.Line)
			if err != nil {
				return "", fmt.Errorf("README.md:%d: the Go block under %q does not parse: %v", b.Line, b.Heading, err)
			}
			if err := os.WriteFile(filepath.Join(pdir, "env.go"), []byte(readmeEnv), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(pdir, "block.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// go vet type-checks every package and reports each one's errors.
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = filepath.Join(dir, "app")
	// The module proxy is the environment's: on a cold module cache the
	// graph needs go.mod files (of dependencies' old requirements) that no
	// build of the repository has fetched yet.
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestREADMEGoBlocksCompile(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := GoBlocks(string(md))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(blocks) < 5 {
		t.Fatalf("README.md has %d Go blocks; the check expects the Use program and the fragments after it", len(blocks))
	}
	if _, err := Program(string(md), "Use"); err != nil {
		t.Errorf("README.md: %v (the install check builds it as a program)", err)
	}
	if report, err := compileBlocks(t, blocks); err != nil {
		t.Fatalf("README.md's Go blocks do not compile (fragments are wrapped as compile_test.go describes): %v\n%s", err, report)
	}
}

// The check fails on what a reader would paste and not compile: here the
// README's earlier Use snippet, which declared lease and err twice.
func TestREADMECheckRefusesARedeclaration(t *testing.T) {
	old := "lease, err := c.Acquire(ctx, \"lock:inventory:12345\")\n" +
		"lease, err := c.TryAcquire(ctx, \"lock:inventory:12345\")   // errors.Is(err, turnstile.ErrNotAcquired)\n" +
		"defer lease.Release(ctx)\n"
	report, err := compileBlocks(t, []Block{{Lang: "go", Line: 42, Heading: "Use", Code: old}})
	if err == nil {
		t.Fatal("a block that declares lease and err twice compiled")
	}
	if !strings.Contains(report, "README.md:43: no new variables on left side of :=") {
		t.Fatalf("the report does not name the redeclaration at README.md:43:\n%s", report)
	}
}

func TestWrapFragmentUsesDeclaredNamesAndImports(t *testing.T) {
	src, err := wrapFragment("lease, err := c.Acquire(ctx, key)\nlog.Print(turnstile.ErrNotAcquired)\n", 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"log"`, `"github.com/turnstilelock/turnstile"`, "_ = lease", "_ = err", "func readmeBlock()", "//line README.md:7\nlease, err :="} {
		if !strings.Contains(src, want) {
			t.Errorf("wrapped fragment lacks %s:\n%s", want, src)
		}
	}
	if _, err := wrapFragment("func {", 1); err == nil {
		t.Error("a fragment that is no function body was wrapped without error")
	}
}

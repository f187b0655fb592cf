package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumInstall is the command that installs the browser the tests
// drive (./scripts/test.sh runs it).
const chromiumInstall = "apt-get install -y chromium"

// browser is a headless Chromium tab, closed when the test ends, with
// the errors its console and its page reported.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	// problems are console errors, uncaught exceptions and the browser's
	// own error entries (a failed load).
	problems []string
}

// newBrowser starts Debian's chromium headless. A missing chromium fails
// the test with the command that installs it: the page is tested in a
// real browser or not at all.
func newBrowser(t testing.TB) *browser {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatalf("chromium is not installed: the operator page's tests drive it headless. Install it with: %s (./scripts/test.sh does)", chromiumInstall)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests may run as root, in a container
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	// The first run starts the browser; it takes no timeout (that would
	// stop the browser), and the machine may take a while.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start chromium (%s): %v", path, err)
	}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.report(m.String() + " (" + m.URL + ")")
			}
		}
	}()
	t.Cleanup(func() { cancelCtx(); cancelAlloc(); <-done })
	return b
}

func (b *browser) report(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// takeProblems returns the errors reported so far, and forgets them.
func (b *browser) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// run runs actions, bounded generously.
func (b *browser) run(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b.diagnose())
	}
}

// diagnose says what the page shows and what the browser reported, for a
// failure's message.
func (b *browser) diagnose() string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		page = "(the page cannot be read: " + err.Error() + ")"
	}
	return fmt.Sprintf("the page:\n%s\nthe browser reported: %q", page, b.takeProblems())
}

// eval evaluates a script expression, awaiting a promise.
func eval[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the text of the first element matching a CSS selector, "" if
// none does.
func (b *browser) text(t testing.TB, selector string) string {
	t.Helper()
	return eval[string](t, b, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, selector))
}

// visible says whether an element matching selector is shown.
func (b *browser) visible(t testing.TB, selector string) bool {
	t.Helper()
	return eval[bool](t, b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.offsetParent !== null; })()`, selector))
}

// screenshot saves the page as name.png in the screenshot directory:
// $TURNSTILE_SCREENSHOTS, else a directory under the system's temporary
// one that the test names.
func (b *browser) screenshot(t testing.TB, name string) {
	t.Helper()
	dir := os.Getenv("TURNSTILE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "turnstile-dashboard-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

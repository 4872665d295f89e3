// Package browsertest finds the browser the chromedp tests drive and the directory their
// screenshots go to.
package browsertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns the path of Debian's chromium (scripts/test.sh installs it when missing).
// Without one the test is skipped, except in CI or with SWITCHYARD_TEST_BROWSER=1, where a
// missing browser is a failure, not a test to skip.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" || os.Getenv("SWITCHYARD_TEST_BROWSER") == "1" {
		t.Fatal("no chromium on PATH although CI needs the browser test: apt-get install chromium")
	}
	t.Skip("no chromium on PATH: scripts/test.sh installs it (apt-get install chromium)")
	return ""
}

// ArtifactsDir is the repository's artifacts/ directory, which scripts/test.sh keeps.
func ArtifactsDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	out := filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// Options are the allocator options of a headless Chromium at a window size. The browser may
// take long to start on a busy machine, so its DevTools address is waited for generously.
func Options(chrome string, width, height int) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.WindowSize(width, height),
		chromedp.WSURLReadTimeout(3*time.Minute))
}

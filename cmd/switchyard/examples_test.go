package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// buildExamples builds every program under examples/ into a directory of the test, with one
// command as a user would run it: go build ./examples/... (the build cache makes a second
// test's build cheap).
func buildExamples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator), "./examples/...")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/...: %v\n%s", err, out)
	}
	return dir
}

func TestExamplesBuild(t *testing.T) {
	dir := buildExamples(t)
	entries, err := os.ReadDir(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name())); err != nil {
			t.Errorf("examples/%s built no program: %v", e.Name(), err)
		}
	}
}

// TestSubmitAndWaitExample runs examples/submit-and-wait against a served binary, with the key
// `admin bootstrap` printed, exactly as docs/getting-started.md tells a user to.
func TestSubmitAndWaitExample(t *testing.T) {
	svc := startSDKService(t, 10)
	prog := filepath.Join(buildExamples(t), "submit-and-wait")
	out := runExample(t, svc, prog, `{"greeting":"hello from the example"}`)
	if !strings.Contains(out, "submitted ") || !strings.Contains(out, " COMPLETED output=") ||
		!strings.Contains(out, `output={"greeting":"hello from the example"}`) || !strings.Contains(out, "totalUsage=1") {
		t.Fatalf("submit-and-wait printed:\n%s", out)
	}
	t.Logf("submit-and-wait printed:\n%s", out)

	// Without credentials it says what to set and fails.
	cmd := exec.Command(prog)
	cmd.Env = []string{"SWITCHYARD_URL=" + svc.cli.url("")}
	res, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(res), "SWITCHYARD_API_KEY") {
		t.Fatalf("without credentials: %v\n%s", err, res)
	}
}

// TestTriggerAndStreamExample defines a workflow with the admin CLI, then runs
// examples/trigger-and-stream on it and expects the run's stream to end COMPLETED.
func TestTriggerAndStreamExample(t *testing.T) {
	svc := startSDKService(t, 10)
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name":"example-flow","components":[`+
		`{"id":"start","module":"ON_API_CALLED"},{"id":"echo","module":"core.echo"}],`+
		`"edges":[{"from":"start","to":"echo"}]}`)
	out := runExample(t, svc, filepath.Join(buildExamples(t), "trigger-and-stream"), wf["id"].(string), `{"order":42}`)
	if !strings.Contains(out, "run ") || !strings.Contains(out, " COMPLETED ") {
		t.Fatalf("trigger-and-stream printed:\n%s", out)
	}
	t.Logf("trigger-and-stream printed:\n%s", out)
}

// TestGettingStartedCurl runs the curl and OpenSSL snippet of docs/getting-started.md, as
// written, against a served binary: the first execution a new user makes must work.
func TestGettingStartedCurl(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "openssl", "base64", "fold", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the snippet needs %s, which CI must have: %v", tool, err)
			}
			t.Skipf("the snippet needs %s: %v", tool, err)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- getting-started:curl")
	_, rest, ok2 := strings.Cut(rest, "```sh\n")
	script, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/getting-started.md: the marked curl snippet is missing")
	}
	svc := startSDKService(t, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	// The snippet runs where a user stands, in the checkout: it must leave nothing there (the key
	// as PEM is a private key), only in the temporary directory.
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		"TMPDIR="+t.TempDir(),
		"SWITCHYARD_URL="+svc.cli.url(""),
		"SWITCHYARD_API_KEY="+svc.key.APIKey,
		"SWITCHYARD_API_SECRET="+svc.key.APISecret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the snippet failed: %v\n%s", err, out)
	}
	if left, _ := os.ReadDir(cmd.Dir); len(left) > 0 {
		t.Fatalf("the snippet left %d files in the directory it ran in (%s, ...)", len(left), left[0].Name())
	}
	// Three answers: the submit and the GET (both COMPLETED records), then the stream's one event.
	if n := strings.Count(string(out), `"status":"COMPLETED"`); n != 3 || !strings.Contains(string(out), "data: ") ||
		!strings.Contains(string(out), `"output":{"hello":"world"}`) {
		t.Fatalf("the snippet printed (%d COMPLETED):\n%s", n, out)
	}
}

// runExample runs an example program against the service with the bootstrap key in its
// environment, as docs/getting-started.md tells a user to, and returns what it printed.
func runExample(t *testing.T, svc *sdkService, prog string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(),
		"SWITCHYARD_URL="+svc.cli.url(""),
		"SWITCHYARD_API_KEY="+svc.key.APIKey,
		"SWITCHYARD_API_SECRET="+svc.key.APISecret)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s\nserver output:\n%s", filepath.Base(prog), err, &stdout, &stderr, svc.srv.out)
	}
	return stdout.String()
}

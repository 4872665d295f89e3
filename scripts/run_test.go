package scripts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/internal/syncbuf"
)

// inNetns marks the copy of this test that runs inside its own network namespace.
const inNetns = "SWITCHYARD_TEST_IN_NETNS"

// TestRunShKeepsTheCheckoutsDatabase is issue 13's first hour, from a fresh copy of the checkout
// on a machine where 127.0.0.1:5432 is absent at the first start and present at the second:
// scripts/run.sh twice serves the same data, the second start prints no FIRST START, and
// bin/switchyard without DATABASE_URL reaches the service's database. The machine is a private
// network namespace (unshare -n), whose loopback has no 5432 until the test starts a throwaway
// PostgreSQL there; the test re-runs itself inside it.
func TestRunShKeepsTheCheckoutsDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the service twice from a copy of the checkout; skipped with -short")
	}
	if os.Getenv(inNetns) == "1" {
		firstHour(t)
		return
	}
	if reason := netnsUnavailable(); reason != "" {
		t.Skip("needs a private network namespace, which is impossible here: " + reason)
	}
	if _, err := postgresBin(); err != nil {
		t.Skip("needs the PostgreSQL server binaries installed (scripts/test.sh installs them when it starts a private cluster): " + err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	// The namespace has no network: the modules the binary needs must be in the module cache
	// (go list fetches any that are missing, here, where the network is).
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	list := exec.CommandContext(ctx, goBin, "list", "-deps", "./cmd/switchyard")
	list.Dir = ".."
	if out, err := list.CombinedOutput(); err != nil {
		t.Fatalf("go list -deps ./cmd/switchyard: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, "unshare", "-n", "--", os.Args[0],
		"-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=9m")
	cmd.Env = append(os.Environ(), inNetns+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil || !strings.Contains(out.String(), "--- PASS: "+t.Name()) {
		t.Fatalf("inside the network namespace: %v\n%s", err, out.String())
	}
	t.Logf("inside the network namespace:\n%s", out.String())
}

// netnsUnavailable says why this process cannot make a network namespace, or "" if it can.
func netnsUnavailable() string {
	if runtime.GOOS != "linux" {
		return "not Linux"
	}
	for _, tool := range []string{"unshare", "ip", "runuser"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed"
		}
	}
	if os.Geteuid() != 0 {
		return "not root (unshare -n and running PostgreSQL as the postgres user need it)"
	}
	if out, err := exec.Command("unshare", "-n", "--", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Sprintf("unshare -n fails: %v: %s", err, bytes.TrimSpace(out))
	}
	return ""
}

// postgresBin is the directory of the newest installed PostgreSQL server binaries.
func postgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if _, err := os.Stat(filepath.Join(filepath.Dir(real), "pg_ctl")); err == nil {
				return filepath.Dir(real), nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) < versionOf(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("no initdb on PATH or in /usr/lib/postgresql/*/bin")
}

func versionOf(bindir string) int {
	var v int
	fmt.Sscan(filepath.Base(filepath.Dir(bindir)), &v)
	return v
}

// firstHour runs inside the namespace.
func firstHour(t *testing.T) {
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v: %s", err, out)
	}
	if portOpen("127.0.0.1:5432") {
		t.Fatal("127.0.0.1:5432 answers inside a new network namespace")
	}
	// The copy's path is fixed per checkout: the Go build cache keys packages by their directory,
	// so a second run of this test rebuilds nothing that did not change.
	abs, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(os.TempDir(), fmt.Sprintf("switchyard-first-hour-%08x", crc32.ChecksumIEEE([]byte(abs))))
	stopLeftovers(base)
	if err := os.RemoveAll(base); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// The private cluster runs as the postgres OS user, which must reach the checkout.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(base, "switchyard")
	copyCheckout(t, "..", repo)
	env := scriptEnv()

	// First start: no server on 5432, so a private cluster in the checkout.
	began := time.Now()
	t.Cleanup(func() { pgctlStop(filepath.Join(repo, ".data", "postgres", "data")) })
	first := startRunSh(t, repo, env)
	first.waitReady(t, 6*time.Minute)
	t.Logf("first start ready after %s", time.Since(began).Round(time.Second))
	out := first.out.String()
	if !strings.Contains(out, "FIRST START") {
		t.Fatalf("the first start printed no FIRST START banner:\n%s", out)
	}
	if n := strings.Count(out, "SWITCHYARD_SECRET_KEY is not set"); n != 1 {
		t.Fatalf("the first start warns %d times about the generated secret key, want once:\n%s", n, out)
	}
	boot := bannerJSON(t, out)
	record, err := os.ReadFile(filepath.Join(repo, ".data", "database.env"))
	if err != nil || !strings.Contains(string(record), "SOURCE=private") || !strings.Contains(string(record), "/switchyard?") {
		t.Fatalf("the first start recorded no private database in .data/database.env (%v):\n%s\n%s", err, record, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New("http://127.0.0.1:8080", boot.APIKey, boot.APISecret)
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Submit(ctx, client.SubmitRequest{Module: "core.echo", Input: map[string]any{"hello": "first start"}, WaitForMs: 10000})
	if err != nil || e.Status != client.StatusCompleted {
		t.Fatalf("a first execution: %+v %v\n%s", e, err, first.out)
	}
	first.stop(t)

	// Between the starts: the private cluster stops (a reboot), and 127.0.0.1:5432 appears.
	if out, err := runScript(repo, env, "scripts/postgres.sh", "stop"); err != nil {
		t.Fatalf("postgres.sh stop: %v\n%s", err, out)
	}
	startThrowawayPostgres(t, filepath.Join(base, "pg5432"))

	// Second start: the recorded private cluster again, the same data, no banner.
	second := startRunSh(t, repo, env)
	second.waitReady(t, 6*time.Minute)
	t.Logf("second start ready after %s", time.Since(began).Round(time.Second))
	if out := second.out.String(); strings.Contains(out, "FIRST START") {
		t.Fatalf("the second start printed FIRST START again:\n%s", out)
	}
	t.Logf("the second start said:\n%s", scriptLines(second.out.String()))
	got, err := c.GetExecution(ctx, e.ID)
	if err != nil || got.Status != client.StatusCompleted || !strings.Contains(string(got.Output), "first start") {
		t.Fatalf("the second start does not serve the first start's execution with its key: %+v %v\n%s", got, err, second.out)
	}

	// The CLI, run from the checkout without DATABASE_URL as the docs show, reaches the same database.
	audit := exec.Command(filepath.Join(repo, "bin", "switchyard"), "billing", "audit", boot.WorkspaceID)
	audit.Dir, audit.Env = repo, env
	res, err := audit.CombinedOutput()
	if err != nil || !strings.Contains(string(res), "Billing history of workspace "+boot.WorkspaceID) || !strings.Contains(string(res), "audit: clean") {
		t.Fatalf("bin/switchyard billing audit %s without DATABASE_URL: %v\n%s", boot.WorkspaceID, err, res)
	}
	t.Logf("bin/switchyard billing audit, without DATABASE_URL:\n%s", res)
	// Nothing went to the server that appeared on 5432.
	psqlBin, err := exec.LookPath("psql")
	if err != nil {
		psqlBin = filepath.Join(mustPostgresBin(t), "psql")
	}
	psql := exec.Command("runuser", "-u", "postgres", "--", psqlBin, "-X", "-A", "-t",
		"-d", "postgres://postgres@127.0.0.1:5432/postgres", "-c", "select count(*) from pg_database where datname = 'switchyard'")
	psql.Dir = "/"
	if n, err := psql.CombinedOutput(); err != nil || strings.TrimSpace(string(n)) != "0" {
		t.Fatalf("the server on 5432 has a switchyard database (%q, %v): the second start moved", n, err)
	}
	second.stop(t)
}

// scriptLines are the scripts' own messages in a start's output.
func scriptLines(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "postgres.sh: ") || strings.HasPrefix(l, "run.sh: ") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// copyCheckout copies what a fresh clone of the checkout at src holds (its tracked files and
// new ones not ignored, with local edits) to dst; outside git, everything but build and state.
func copyCheckout(t *testing.T, src, dst string) {
	t.Helper()
	var files []string
	if out, err := exec.Command("git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
	} else {
		skip := map[string]bool{".git": true, ".data": true, "bin": true, "artifacts": true, "data": true}
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if d.IsDir() && skip[rel] {
				return filepath.SkipDir
			}
			if !d.IsDir() {
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		info, err := os.Lstat(filepath.Join(src, f))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or not a plain file
		}
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptEnv is this process's environment without anything that would choose a database or
// configure the service, and with the Go toolchain on PATH and no network fetches.
func scriptEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || name == "KURRENTDB_URL" || name == inNetns || name == "PATH" ||
			strings.HasPrefix(name, "SWITCHYARD_") || strings.HasPrefix(name, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+filepath.Join(runtime.GOROOT(), "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOPROXY=off", "GOTOOLCHAIN=local")
}

// runSh is a running scripts/run.sh (which becomes bin/switchyard serve).
type runSh struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

func startRunSh(t *testing.T, repo string, env []string) *runSh {
	t.Helper()
	cmd := exec.Command("bash", "scripts/run.sh")
	cmd.Dir, cmd.Env = repo, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r := &runSh{cmd: cmd, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
	})
	return r
}

// waitReady polls /readyz until it answers 200, the script exits, or the deadline passes (the
// first start builds the binary).
func (r *runSh) waitReady(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: 5 * time.Second}
	for {
		if resp, err := hc.Get("http://127.0.0.1:8080/readyz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-r.done:
			t.Fatalf("scripts/run.sh exited (%v) before the service was ready:\n%s", r.err, r.out)
		case <-deadline:
			t.Fatalf("the service was not ready within %s:\n%s", within, r.out)
		case <-tick.C:
		}
	}
}

// stop ends the service as Ctrl-C does and waits for it to exit.
func (r *runSh) stop(t *testing.T) {
	t.Helper()
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("the service did not stop within a minute of SIGINT:\n%s", r.out)
	}
}

type bootstrap struct {
	WorkspaceID string `json:"workspaceId"`
	APIKey      string `json:"apiKey"`
	APISecret   string `json:"apiSecret"`
}

// bannerJSON is the bootstrap output inside the FIRST START banner.
func bannerJSON(t *testing.T, out string) bootstrap {
	t.Helper()
	_, rest, _ := strings.Cut(out, "FIRST START")
	i := strings.Index(rest, "{")
	j := strings.Index(rest, "\n}")
	var b bootstrap
	if i < 0 || j < i || json.Unmarshal([]byte(rest[i:j+2]), &b) != nil || b.APIKey == "" || b.WorkspaceID == "" {
		t.Fatalf("no bootstrap JSON in the FIRST START banner:\n%s", out)
	}
	return b
}

func runScript(repo string, env []string, args ...string) (string, error) {
	cmd := exec.Command("bash", args...)
	cmd.Dir, cmd.Env = repo, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustPostgresBin(t *testing.T) string {
	t.Helper()
	dir, err := postgresBin()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// startThrowawayPostgres runs a cluster on 127.0.0.1:5432 (trust, no fsync) in dir, stopped at
// the end of the test.
func startThrowawayPostgres(t *testing.T, dir string) {
	t.Helper()
	bin := mustPostgresBin(t)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown postgres %s: %v: %s", dir, err, out)
	}
	asPostgres := func(args ...string) {
		t.Helper()
		cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		cmd.Dir = "/"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	asPostgres(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync")
	conf := "port = 5432\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nfsync = off\n"
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(conf)
	f.Close()
	t.Cleanup(func() { pgctlStop(data) })
	asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start")
	if !portOpen("127.0.0.1:5432") {
		t.Fatal("the throwaway PostgreSQL does not listen on 127.0.0.1:5432")
	}
}

// stopLeftovers stops the clusters a killed earlier run left in base.
func stopLeftovers(base string) {
	pgctlStop(filepath.Join(base, "switchyard", ".data", "postgres", "data"))
	pgctlStop(filepath.Join(base, "pg5432", "data"))
}

// pgctlStop stops the cluster in data if it runs (cleanup: errors are of no use by then).
func pgctlStop(data string) {
	bin, err := postgresBin()
	if err != nil {
		return
	}
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
		return
	}
	cmd := exec.Command("runuser", "-u", "postgres", "--", filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
	cmd.Dir = "/"
	cmd.Run()
}

func portOpen(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

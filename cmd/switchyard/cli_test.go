package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/internal/syncbuf"
	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/projections"
)

// These tests drive the built binary the way an operator does: a real process, its own
// database, environment variables, exit codes and output.

var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// switchyardBinary builds ./cmd/switchyard once per test run and returns its path.
func switchyardBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the switchyard binary; skipped with -short")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "switchyard-cli-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "switchyard")
		// The go command that runs the tests may not be on PATH (scripts/test.sh puts it there,
		// an IDE may not); the toolchain's own is the same compiler.
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		// A test build: it honours SWITCHYARD_TEST_CLOCK_* (testclock.go), which tests that
		// must move the service's clock set; without them it is the service's own binary.
		out, err := exec.Command(goBin, "build", "-tags", "switchyard_testclock", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build -tags switchyard_testclock ./cmd/switchyard: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// cli runs the binary with a fixed environment.
type cli struct {
	t     *testing.T
	bin   string
	env   []string
	port  int
	dbURL string // the test's database, for the test's own connections (no pool parameters)
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// newCLI gives the binary its own empty database, data directory and listen port. Variables of
// the developer's shell that would change its behaviour are left out.
func newCLI(t *testing.T) *cli {
	t.Helper()
	bin := switchyardBinary(t)
	port := freePort(t)
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || name == "KURRENTDB_URL" || strings.HasPrefix(name, "SWITCHYARD_") {
			continue
		}
		env = append(env, kv)
	}
	dbURL := testdb.New(t)
	env = append(env,
		"DATABASE_URL="+capPool(t, dbURL, childPoolSize),
		"SWITCHYARD_DATA_DIR="+t.TempDir(),
		fmt.Sprintf("SWITCHYARD_LISTEN=127.0.0.1:%d", port),
		fmt.Sprintf("SWITCHYARD_BASE_URL=http://127.0.0.1:%d", port),
		"SWITCHYARD_LOG_LEVEL=warn",
		"SWITCHYARD_SHUTDOWN_TIMEOUT=10s",
	)
	return &cli{t: t, bin: bin, env: env, port: port, dbURL: dbURL}
}

// childPoolSize caps each child process's connection pool. The test server may allow only
// PostgreSQL's default 100 connections while test packages, and several serve processes, run at
// once; serve's own default pool (40) would let a few busy children exhaust it ("too many
// clients"). A test's load needs far fewer.
const childPoolSize = 10

// capPool adds pool_max_conns to a database URL (pgxpool reads it; the service honours it).
func capPool(t *testing.T, dbURL string, n int) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parse database URL: %v", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", fmt.Sprint(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// freePort finds a port nothing listens on: the service cannot report the port of
// SWITCHYARD_LISTEN=127.0.0.1:0 back, so the test picks one and hands it over.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (c *cli) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", c.port, path) }

// databaseURL is the database the binary uses, for the test's own queries.
func (c *cli) databaseURL() string { return c.dbURL }

// tooManyConnections is PostgreSQL's SQLSTATE for a server out of connection slots.
const tooManyConnections = "53300"

// connect opens a connection of the test's own to the binary's database. PostgreSQL's
// connection slots are shared by every test package running on the machine: a refusal for
// want of one (too many clients) is tried again for up to 30 s rather than failing the test.
func (c *cli) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), c.dbURL)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return conn
		case !errors.As(err, &pgErr) || pgErr.Code != tooManyConnections || time.Now().After(deadline):
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run runs one command to completion with extra environment variables (NAME=value) prepended
// to args as "env:NAME=value" entries.
func (c *cli) run(args ...string) result {
	c.t.Helper()
	env := slices.Clone(c.env)
	for len(args) > 0 && strings.HasPrefix(args[0], "env:") {
		env = append(env, strings.TrimPrefix(args[0], "env:"))
		args = args[1:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		c.t.Fatalf("switchyard %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// ok runs a command that must succeed.
func (c *cli) ok(args ...string) result {
	c.t.Helper()
	res := c.run(args...)
	if res.code != 0 {
		c.t.Fatalf("switchyard %s: %s", strings.Join(args, " "), res)
	}
	return res
}

// okJSON runs a command that must succeed and decodes its standard output into v.
func (c *cli) okJSON(v any, args ...string) {
	c.t.Helper()
	res := c.ok(args...)
	if err := json.Unmarshal([]byte(res.stdout), v); err != nil {
		c.t.Fatalf("switchyard %s: output is not the expected JSON: %v\n%s", strings.Join(args, " "), err, res)
	}
}

// serveProcess is a running `switchyard serve`.
type serveProcess struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error // the process's exit, once done is closed
}

func (c *cli) serve() *serveProcess {
	c.t.Helper()
	cmd := exec.Command(c.bin, "serve")
	cmd.Env = c.env
	s := &serveProcess{cmd: cmd, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	c.t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// serveReady starts `switchyard serve` and waits until it answers /readyz with 200.
func (c *cli) serveReady() *serveProcess {
	c.t.Helper()
	s := c.serve()
	c.waitHTTP(s, "/readyz", 60*time.Second, func(status int, _ string) bool { return status == http.StatusOK })
	return s
}

// get fetches a URL of the service and returns the status and body.
func (c *cli) get(path string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(c.url(path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitHTTP polls path until ok accepts the response, the server exits, or the deadline passes.
func (c *cli) waitHTTP(s *serveProcess, path string, timeout time.Duration, ok func(status int, body string) bool) (int, string) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var status int
	var body string
	var err error
	for {
		status, body, err = c.get(path)
		if err == nil && ok(status, body) {
			return status, body
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("GET %s: no acceptable answer within %s: last status %d, body %q, error %v\nserver output:\n%s",
				path, timeout, status, body, err, s.out)
		}
		select {
		case <-s.done:
			c.t.Fatalf("serve exited (%v) while waiting for GET %s\nserver output:\n%s", s.err, path, s.out)
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM and requires a clean exit (status 0) within the deadline.
func (s *serveProcess) stop(t *testing.T, within time.Duration) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
		if s.err != nil {
			t.Fatalf("serve after SIGTERM: %v\nserver output:\n%s", s.err, s.out)
		}
	case <-time.After(within):
		t.Fatalf("serve still running %s after SIGTERM\nserver output:\n%s", within, s.out)
	}
}

type balanceOut struct {
	WorkspaceID string          `json:"workspaceId"`
	Credit      billing.Credits `json:"credit"`
	Usage       billing.Credits `json:"usage"`
	Total       billing.Credits `json:"total"`
}

func wantBalance(t *testing.T, what string, got balanceOut, ws string, credit, usage billing.Credits) {
	t.Helper()
	if got.WorkspaceID != ws || got.Credit != credit || got.Usage != usage || got.Total != credit+usage {
		t.Fatalf("%s: balance %+v, want workspace %s credit %s usage %s total %s", what, got, ws, credit, usage, credit+usage)
	}
}

// TestCLIEndToEnd walks an operator's session: migrate, start the service, create a user and a
// workspace, move credits, audit, tamper with the read model, rebuild, and shut down.
func TestCLIEndToEnd(t *testing.T) {
	c := newCLI(t)

	// A new database is reported as such, a second run as up to date; neither needs the secret
	// key, so neither warns about it.
	if res := c.ok("migrate"); !strings.Contains(res.stdout, "created the schema in a new database") || strings.Contains(res.stderr, "SWITCHYARD_SECRET_KEY") {
		t.Fatalf("migrate on a new database: %s", res)
	}
	if res := c.ok("migrate"); strings.TrimSpace(res.stdout) != "schema is up to date" {
		t.Fatalf("migrate again: %s", res)
	}

	// The service runs the projectors, so the audits below compare real read models.
	srv := c.serve()
	_, body := c.waitHTTP(srv, "/readyz", time.Minute, func(status int, body string) bool { return status == http.StatusOK })
	var ready struct {
		Ready  bool `json:"ready"`
		Checks []struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || !ready.Ready || len(ready.Checks) == 0 {
		t.Fatalf("/readyz 200 with body %q (%v): want \"ready\":true and its checks", body, err)
	}
	if status, body, err := c.get("/healthz"); err != nil || status != http.StatusOK {
		t.Fatalf("/healthz: %d %q %v", status, body, err)
	}

	var user struct {
		UserID string `json:"userId"`
		Email  string `json:"email"`
		Staff  bool   `json:"staff"`
	}
	c.okJSON(&user, "admin", "user", "create", "--email", "owner@example.com", "--password", "correct horse battery", "--name", "Owner", "--json")
	if user.UserID == "" || user.Email != "owner@example.com" || user.Staff {
		t.Fatalf("user create: %+v", user)
	}
	var ws struct {
		WorkspaceID string `json:"workspaceId"`
		Name        string `json:"name"`
		Owner       string `json:"owner"`
	}
	c.okJSON(&ws, "admin", "workspace", "create", "--name", "Acme", "--owner", "owner@example.com", "--json")
	if ws.WorkspaceID == "" || ws.Name != "Acme" || ws.Owner != "owner@example.com" {
		t.Fatalf("workspace create: %+v", ws)
	}
	id := ws.WorkspaceID

	var bal balanceOut
	c.okJSON(&bal, "admin", "credits", "topup", "--workspace", id, "--amount", "12.5", "--reference", "invoice-1", "--json")
	wantBalance(t, "after top-up", bal, id, 12_500, 0)
	c.okJSON(&bal, "admin", "plan", "renew", "--workspace", id, "--included", "5", "--json")
	wantBalance(t, "after renewal", bal, id, 12_500, 5_000)
	c.okJSON(&bal, "admin", "credits", "topup", "--workspace", id, "--amount", "12.5", "--reference", "invoice-1", "--json")
	wantBalance(t, "after repeating a top-up's reference", bal, id, 12_500, 5_000)
	c.okJSON(&bal, "admin", "credits", "topup", "--workspace", id, "--amount", "0.25", "--json")
	wantBalance(t, "after a second top-up", bal, id, 12_750, 5_000)
	c.okJSON(&bal, "admin", "plan", "renew", "--workspace", id, "--included", "3", "--json")
	wantBalance(t, "after a second renewal", bal, id, 12_750, 3_000)
	if res := c.ok("admin", "credits", "topup", "--workspace", id, "--amount", "1"); !strings.Contains(res.stdout, "credit 13.75, usage 3, total 16.75") {
		t.Fatalf("top-up without --json: %s", res)
	}

	// Audit: clean, as a table and as JSON. --wait lets the service's projector catch up on a
	// busy machine; it returns as soon as it has.
	res := c.ok("billing", "audit", "--wait", "1m", id)
	if !strings.Contains(res.stdout, "audit: clean") || !strings.Contains(res.stdout, "renewal") || !strings.Contains(res.stdout, "invoice-1") {
		t.Fatalf("audit: %s", res)
	}
	var rep projections.AuditReport
	c.okJSON(&rep, "billing", "audit", "--wait", "1m", id, "--json")
	if rep.WorkspaceID != id || len(rep.Entries) != 5 || !rep.Clean() || rep.Behind ||
		rep.Folded.Credit != 13_750 || rep.Folded.Usage != 3_000 || rep.ReadModel != rep.Folded || rep.ReadModelRevision != 4 {
		t.Fatalf("audit --json: %+v", rep)
	}

	// Tampering with the read model makes the audit fail with exit status 2.
	conn, err := pgx.Connect(context.Background(), c.databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if tag, err := conn.Exec(context.Background(), `UPDATE balances SET credit = credit + 1000 WHERE workspace_id = $1`, id); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tamper: %v %v", tag, err)
	}
	res = c.run("billing", "audit", "--wait", "1m", id)
	if res.code != 2 || strings.Contains(res.stdout, "audit: clean") || !strings.Contains(res.stdout, "difference") {
		t.Fatalf("audit after tampering: want exit 2 and the difference: %s", res)
	}
	res = c.run("billing", "audit", "--wait", "1m", id, "--json")
	if res.code != 2 {
		t.Fatalf("audit --json after tampering: want exit 2: %s", res)
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil || rep.Clean() {
		t.Fatalf("audit --json after tampering: %v %+v", err, rep)
	}

	// Status lists every projector.
	var status []projections.Status
	c.okJSON(&status, "projections", "status", "--json")
	var names []string
	for _, s := range status {
		names = append(names, s.Name)
		if s.Error != "" {
			t.Errorf("projector %s failed: %s", s.Name, s.Error)
		}
	}
	var want []string
	for _, p := range projections.All() {
		want = append(want, p.Name())
	}
	if !slices.Equal(names, want) {
		t.Fatalf("projections status lists %v, want %v", names, want)
	}
	if res := c.ok("projections", "status"); !strings.Contains(res.stdout, "PROJECTOR") || !strings.Contains(res.stdout, "billing") {
		t.Fatalf("projections status: %s", res)
	}

	// A rebuild, while the service runs, replaces the tampered table with one from the log.
	res = c.ok("projections", "rebuild", "--all")
	for _, name := range want {
		if !strings.Contains(res.stdout, name+": replaying") || !strings.Contains(res.stdout, name+": swapped in") {
			t.Fatalf("rebuild --all: no progress or swap line for %s: %s", name, res)
		}
	}
	// Progress says how far, of how many, and how long is left.
	if !regexp.MustCompile(`billing: \d+ of \d+ events \(\d+%\), \d+ events/s, \S+ left`).MatchString(res.stdout) {
		t.Fatalf("rebuild --all: no progress line with total, percentage and time left: %s", res)
	}
	if res := c.ok("billing", "audit", "--wait", "1m", id); !strings.Contains(res.stdout, "audit: clean") {
		t.Fatalf("audit after rebuild: %s", res)
	}
	// The running projector writes into the swapped-in tables.
	c.okJSON(&bal, "admin", "credits", "topup", "--workspace", id, "--amount", "2", "--json")
	wantBalance(t, "after the rebuild", bal, id, 15_750, 3_000)
	c.okJSON(&rep, "billing", "audit", "--wait", "1m", id, "--json")
	if !rep.Clean() || rep.Behind || rep.ReadModel.Credit != 15_750 {
		t.Fatalf("audit after rebuild and a new top-up: %+v", rep)
	}

	// Metrics include the projections'.
	c.waitHTTP(srv, "/metrics", 30*time.Second, func(status int, body string) bool {
		return status == http.StatusOK && strings.Contains(body, `switchyard_projection_events_applied_total{projector="billing"}`) &&
			strings.Contains(body, `switchyard_projection_running{projector="billing"} 1`)
	})

	// An unknown /v1 route answers 404 with the SPEC.md 7 error body.
	code, body, err := c.get("/v1/nope")
	if err != nil || code != http.StatusNotFound {
		t.Fatalf("GET /v1/nope: %d %q %v", code, body, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatalf("GET /v1/nope body %q: %v", body, err)
	}
	var errBody struct {
		Message    string `json:"message"`
		StatusCode int    `json:"statusCode"`
		Error      string `json:"error"`
	}
	json.Unmarshal([]byte(body), &errBody)
	if len(fields) != 3 || errBody.Message == "" || errBody.StatusCode != 404 || errBody.Error != "Not Found" {
		t.Fatalf("GET /v1/nope body %q: want exactly message, statusCode 404, error \"Not Found\"", body)
	}

	srv.stop(t, 30*time.Second)
}

// TestCLIErrors checks that bad input and bad configuration fail with a clear message and a
// non-zero exit status, before touching anything.
func TestCLIErrors(t *testing.T) {
	c := newCLI(t)

	if res := c.ok("version"); !strings.HasPrefix(res.stdout, "switchyard ") {
		t.Fatalf("version: %s", res)
	}
	if res := c.ok("--help"); !strings.Contains(res.stdout, "serve") || !strings.Contains(res.stdout, "SWITCHYARD_LISTEN") {
		t.Fatalf("--help lists neither the commands nor the environment: %s", res)
	} else if cmds, vars := strings.Index(res.stdout, "Available Commands:"), strings.Index(res.stdout, "Environment variables:"); cmds < 0 || vars < cmds {
		t.Fatalf("--help lists the environment (at %d) before the commands (at %d): %s", vars, cmds, res)
	}
	if res := c.ok("projections", "rebuild", "--help"); !strings.Contains(res.stdout, "Projectors: ") || !strings.Contains(res.stdout, "billing") {
		t.Fatalf("rebuild --help does not list the projectors: %s", res)
	}

	cases := []struct {
		name string
		args []string
		want []string // each must appear in standard error
	}{
		{"amount not a number", []string{"admin", "credits", "topup", "--workspace", "ws-1", "--amount", "abc"}, []string{"--amount", "must be a number"}},
		{"amount too precise", []string{"admin", "plan", "renew", "--workspace", "ws-1", "--included", "1.0005"}, []string{"--included", "three decimals"}},
		{"required flag", []string{"admin", "credits", "topup", "--amount", "5"}, []string{"workspace"}},
		{"unknown command", []string{"frobnicate"}, []string{"frobnicate"}},
		{"rebuild without a name", []string{"projections", "rebuild"}, []string{"--all", "billing"}},
		{"rebuild of an unknown projector", []string{"projections", "rebuild", "biling"}, []string{`unknown projector "biling"`, "billing"}},
		{"bad listen address", []string{"env:SWITCHYARD_LISTEN=8080", "serve"}, []string{"SWITCHYARD_LISTEN", "8080"}},
		{"bad event store", []string{"env:SWITCHYARD_EVENT_STORE=mysql", "migrate"}, []string{"SWITCHYARD_EVENT_STORE"}},
		{"bad duration", []string{"env:SWITCHYARD_SHUTDOWN_TIMEOUT=30", "billing", "audit", "ws-1"}, []string{"SWITCHYARD_SHUTDOWN_TIMEOUT"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := c.run(tc.args...)
			if res.code == 0 {
				t.Fatalf("switchyard %v succeeded: %s", tc.args, res)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stderr, w) {
					t.Fatalf("switchyard %v: standard error does not mention %q: %s", tc.args, w, res)
				}
			}
		})
	}

	// An unknown workspace is an error, not an empty, clean audit.
	c.ok("migrate")
	res := c.run("billing", "audit", "00000000-0000-0000-0000-000000000000")
	if res.code == 0 || strings.Contains(res.stdout, "audit: clean") || !strings.Contains(res.stderr, "not found") {
		t.Fatalf("audit of an unknown workspace: %s", res)
	}
	// So is a user that does not exist as a workspace owner.
	res = c.run("admin", "workspace", "create", "--name", "Orphan", "--owner", "nobody@example.com")
	if res.code == 0 || !strings.Contains(res.stderr, "error:") {
		t.Fatalf("workspace with an unknown owner: %s", res)
	}
}

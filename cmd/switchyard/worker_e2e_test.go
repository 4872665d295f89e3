package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// registerWorkerModule registers a workspace module with a worker transport in a workspace of
// the service, with the admin CLI.
func registerWorkerModule(t *testing.T, svc *sdkService, workspaceID, name, outputSchema string) {
	t.Helper()
	body := map[string]any{}
	if outputSchema != "" {
		body["outputSchema"] = json.RawMessage(outputSchema)
	}
	registerWorkerModuleWith(t, svc, workspaceID, name, body)
}

// registerWorkerModuleWith is registerWorkerModule with more of the module's fields.
func registerWorkerModuleWith(t *testing.T, svc *sdkService, workspaceID, name string, body map[string]any) {
	t.Helper()
	body["name"], body["transport"] = name, map[string]any{"type": "worker"}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "module.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	svc.cli.ok("admin", "module", "register", "--workspace", workspaceID, "--file", path)
}

// workerProcess is examples/worker running against a service: a worker in a process of its
// own, whose printed lines the test reads.
type workerProcess struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	seen  chan struct{}
	done  chan struct{}
}

func startWorker(t *testing.T, bin, baseURL string, key sdkKey, args ...string) *workerProcess {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "worker"), args...)
	cmd.Env = append(os.Environ(), "SWITCHYARD_URL="+baseURL, "SWITCHYARD_API_KEY="+key.APIKey, "SWITCHYARD_API_SECRET="+key.APISecret)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProcess{cmd: cmd, seen: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
			select {
			case w.seen <- struct{}{}:
			default:
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
	})
	w.await(t, 30*time.Second, "worker polling for")
	return w
}

// await waits until the worker printed a line containing s.
func (w *workerProcess) await(t *testing.T, within time.Duration, s string) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if w.printed(s) > 0 {
			return
		}
		select {
		case <-w.seen:
		case <-w.done:
			if w.printed(s) > 0 {
				return
			}
			t.Fatalf("the worker exited before printing %q", s)
		case <-deadline.C:
			t.Fatalf("the worker did not print %q within %s", s, within)
		}
	}
}

func (w *workerProcess) printed(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// submitTasks submits n calls of module through c and returns their ids.
func submitTasks(t *testing.T, c *rawCaller, module string, n, attempts int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		r := c.submit(fmt.Sprintf(`{"module":%q,"input":{"i":%d},"config":{},"attempts":%d}`, module, i, attempts))
		mustStatus(t, r, http.StatusOK, "submit")
		ids[i] = fmt.Sprint(r.json(t)["id"])
	}
	return ids
}

// A worker killed (SIGKILL) while it holds a task: the task is retried once its lease runs out,
// by another worker, and completes once, charged once.
func TestWorkerKilledMidTaskIsRetriedAfterItsLease(t *testing.T) {
	svc := startSDKService(t, 10, "SWITCHYARD_TASK_LEASE=2s")
	registerWorkerModule(t, svc, svc.key.WorkspaceID, "acme.echo", "")
	bin := buildExamples(t)
	first := startWorker(t, bin, svc.cli.url(""), svc.key, "-module", "acme.echo", "-id", "first", "-delay", "1h")
	c := svc.caller(t, svc.key)
	id := submitTasks(t, c, "acme.echo", 1, 2)[0]
	first.await(t, 30*time.Second, "started "+id+" attempt 1")
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	second := startWorker(t, bin, svc.cli.url(""), svc.key, "-module", "acme.echo", "-id", "second")
	m := pollExecution(t, c, id, 60*time.Second, terminal)
	if m["status"] != "COMPLETED" || m["totalUsage"] != float64(1) {
		t.Fatalf("after the worker's crash: %v", m)
	}
	if n, n2 := second.printed("started "+id), second.printed("started "+id+" attempt 2"); n != 1 || n2 != 1 {
		t.Fatalf("the second worker ran the task %d times (%d as attempt 2)", n, n2)
	}
	svc.srv.stop(t, 30*time.Second)
	if total := auditTotal(t, svc.cli, svc.key.WorkspaceID); total != 9 {
		t.Fatalf("balance %v after one call of 1 credit, want 9", total)
	}
}

// switchProxy forwards every request to the service it points at, which the test changes.
type switchProxy struct {
	mu     sync.Mutex
	target string
}

func (p *switchProxy) set(base string) {
	p.mu.Lock()
	p.target = base
	p.mu.Unlock()
}

func (p *switchProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	u, _ := url.Parse(target)
	httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
}

// serve killed (SIGKILL) while its worker holds tasks: the worker's heartbeats and completions
// go to a second instance, and land; nothing is run or charged twice.
func TestServeKilledWithTasksLeasedCompletionsLandElsewhere(t *testing.T) {
	const n = 5
	svc := startSDKService(t, 100)
	registerWorkerModule(t, svc, svc.key.WorkspaceID, "acme.echo", "")
	second, s2 := svc.startSecond(t)
	proxy := &switchProxy{target: svc.cli.url("")}
	front := httptest.NewServer(proxy)
	defer front.Close()
	w := startWorker(t, buildExamples(t), front.URL, svc.key, "-module", "acme.echo", "-concurrency", "8", "-delay", "3s")
	c := svc.caller(t, svc.key)
	ids := submitTasks(t, c, "acme.echo", n, 1)
	for _, id := range ids {
		w.await(t, 30*time.Second, "started "+id+" attempt 1")
	}
	proxy.set(second.url(""))
	if err := svc.srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-svc.srv.done
	c2 := newRawCaller(t, second.url(""), svc.key)
	for _, id := range ids {
		m := pollExecution(t, c2, id, 60*time.Second, terminal)
		if m["status"] != "COMPLETED" || m["totalUsage"] != float64(1) {
			t.Fatalf("execution %s after serve's crash: %v", id, m)
		}
		if got := w.printed("started " + id); got != 1 {
			t.Fatalf("execution %s ran %d times", id, got)
		}
	}
	s2.stop(t, 30*time.Second)
	if total := auditTotal(t, svc.cli, svc.key.WorkspaceID); total != 100-n {
		t.Fatalf("balance %v after %d calls of 1 credit, want %d", total, n, 100-n)
	}
}

// Two serve processes with a worker on each: every attempt is leased to one worker, once, and
// none is lost.
func TestTwoServeProcessesLeaseEachTaskToOneWorker(t *testing.T) {
	const n = 200
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=100000", "SWITCHYARD_RATE_BURST=100000")
	registerWorkerModule(t, svc, svc.key.WorkspaceID, "acme.echo", "")
	second, s2 := svc.startSecond(t)
	bin := buildExamples(t)
	w1 := startWorker(t, bin, svc.cli.url(""), svc.key, "-module", "acme.echo", "-id", "one", "-concurrency", "8")
	w2 := startWorker(t, bin, second.url(""), svc.key, "-module", "acme.echo", "-id", "two", "-concurrency", "8")
	callers := []*rawCaller{svc.caller(t, svc.key), newRawCaller(t, second.url(""), svc.key)}
	ids := submitMany(t, callers, n, 8, func(i int) string {
		return fmt.Sprintf(`{"module":"acme.echo","input":{"i":%d},"config":{}}`, i)
	})
	for i, id := range ids {
		m := pollExecution(t, callers[i%2], id, 120*time.Second, terminal)
		if m["status"] != "COMPLETED" {
			t.Fatalf("execution %s: %v", id, m)
		}
		if got := w1.printed("started "+id) + w2.printed("started "+id); got != 1 {
			t.Fatalf("execution %s was leased %d times", id, got)
		}
	}
	if w1.printed("started ") == 0 || w2.printed("started ") == 0 {
		t.Logf("one worker took every task (%d, %d): allowed, though the polls share", w1.printed("started "), w2.printed("started "))
	}
	s2.stop(t, 30*time.Second)
	svc.srv.stop(t, 30*time.Second)
	if total := auditTotal(t, svc.cli, svc.key.WorkspaceID); total != 1000-n {
		t.Fatalf("balance %v after %d calls, want %d", total, n, 1000-n)
	}
}

// The protocol through HTTP: a poll leases its workspace's tasks only, an output that breaks
// the module's outputSchema is refused 400 naming the field and the task stays leased, a task
// id of another workspace is 404, a lease no longer held is 409, and a scoped key leases no
// standalone task.
func TestWorkerProtocolIsolationSchemaAndStaleLeases(t *testing.T) {
	svc := startSDKService(t, 10)
	registerWorkerModule(t, svc, svc.key.WorkspaceID, "acme.typed", `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`)
	var other struct {
		WorkspaceID string `json:"workspaceId"`
	}
	svc.cli.okJSON(&other, "admin", "workspace", "create", "--name", "other", "--owner", "owner@example.com", "--json")
	otherKey := svc.newKey(t, other.WorkspaceID)
	registerWorkerModule(t, svc, otherKey.WorkspaceID, "acme.typed", "")
	c := svc.caller(t, svc.key)
	oc := svc.caller(t, otherKey)
	id := submitTasks(t, c, "acme.typed", 1, 1)[0]

	r := oc.post("/v1/sdk/tasks/poll", `{"modules":["acme.typed"],"max":10,"waitMs":200,"workerId":"other"}`)
	mustStatus(t, r, http.StatusOK, "another workspace's poll")
	if tasks := r.json(t)["tasks"].([]any); len(tasks) != 0 {
		t.Fatalf("another workspace leased %v", tasks)
	}
	wantErrorBody(t, c.post("/v1/sdk/tasks/poll", `{"modules":["acme.typed"],"max":101,"workerId":"w"}`), http.StatusBadRequest, "max")
	wantErrorBody(t, c.post("/v1/sdk/tasks/poll", `{"modules":["acme.typed"]}`), http.StatusBadRequest, "workerId")

	r = c.post("/v1/sdk/tasks/poll", `{"modules":["acme.typed"],"max":10,"waitMs":10000,"workerId":"w1"}`)
	mustStatus(t, r, http.StatusOK, "poll")
	tasks := r.json(t)["tasks"].([]any)
	if len(tasks) != 1 {
		t.Fatalf("poll: %s", r.body)
	}
	task := tasks[0].(map[string]any)
	if task["executionId"] != id || task["attempt"] != float64(1) || task["module"] != "acme.typed" || task["leaseExpiresAt"] == nil || task["deadline"] == nil {
		t.Fatalf("task: %v", task)
	}
	path := "/v1/sdk/tasks/" + task["taskId"].(string)
	wantErrorBody(t, oc.post(path+"/complete", `{"output":{"n":1}}`), http.StatusNotFound, "")
	wantErrorBody(t, oc.post(path+"/heartbeat", `{}`), http.StatusNotFound, "")
	wantErrorBody(t, c.post(path+"/complete", `{"output":{"n":"one"}}`), http.StatusBadRequest, "output.n")
	r = c.post(path+"/heartbeat", `{"progress":{"done":0.5}}`)
	mustStatus(t, r, http.StatusOK, "heartbeat after a refused output")
	if m := r.json(t); m["cancelRequested"] != false || m["leaseExpiresAt"] == nil {
		t.Fatalf("heartbeat: %s", r.body)
	}
	mustStatus(t, c.post(path+"/complete", `{"output":{"n":1}}`), http.StatusOK, "complete")
	wantErrorBody(t, c.post(path+"/complete", `{"output":{"n":2}}`), http.StatusConflict, "lease")
	wantErrorBody(t, c.post(path+"/heartbeat", `{}`), http.StatusConflict, "lease")
	wantErrorBody(t, c.post(path+"/fail", `{"error":{"code":"x"}}`), http.StatusConflict, "lease")
	m := pollExecution(t, c, id, 30*time.Second, terminal)
	if m["status"] != "COMPLETED" || fmt.Sprint(m["output"]) != "map[n:1]" || m["totalUsage"] != float64(1) {
		t.Fatalf("execution: %v", m)
	}

	// A key scoped to a workflow leases no standalone call's task.
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name":"typed-flow","components":[`+
		`{"id":"start","module":"ON_API_CALLED"},{"id":"echo","module":"core.echo"}],"edges":[{"from":"start","to":"echo"}]}`)
	scoped := svc.caller(t, svc.newKey(t, svc.key.WorkspaceID, "--allowed-workflow", wf["id"].(string)))
	submitTasks(t, c, "acme.typed", 1, 1)
	r = scoped.post("/v1/sdk/tasks/poll", `{"modules":["acme.typed"],"max":10,"waitMs":300,"workerId":"scoped"}`)
	mustStatus(t, r, http.StatusOK, "scoped poll")
	if tasks := r.json(t)["tasks"].([]any); len(tasks) != 0 {
		t.Fatalf("a scoped key leased a standalone task: %v", tasks)
	}
}

// A call with waitForMs through a worker answers with the worker's output.
func TestWaitForMsThroughAWorker(t *testing.T) {
	svc := startSDKService(t, 10)
	registerWorkerModule(t, svc, svc.key.WorkspaceID, "acme.echo", "")
	startWorker(t, buildExamples(t), svc.cli.url(""), svc.key, "-module", "acme.echo")
	r := svc.caller(t, svc.key).submit(`{"module":"acme.echo","input":{"hi":1},"config":{},"waitForMs":10000}`)
	mustStatus(t, r, http.StatusOK, "submit")
	if m := r.json(t); m["status"] != "COMPLETED" || fmt.Sprint(m["output"]) != "map[echo:map[hi:1]]" {
		t.Fatalf("waitForMs through a worker: %s", r.body)
	}
}

// A cacheable worker module's identical repeat inside the cache window, submitted while the
// first call still waits for a worker, is free and gets the first call's output (SPEC.md 2.1):
// the worker runs the call once.
func TestCacheableWorkerModuleRepeatRunsOnceAndIsFree(t *testing.T) {
	svc := startSDKService(t, 10, "SWITCHYARD_CACHE_WINDOW=60s")
	registerWorkerModuleWith(t, svc, svc.key.WorkspaceID, "acme.echo", map[string]any{"cacheable": true})
	c := svc.caller(t, svc.key)
	ids := make([]string, 2)
	for i := range ids {
		r := c.submit(`{"module":"acme.echo","input":{"hi":1},"config":{}}`)
		mustStatus(t, r, http.StatusOK, "submit")
		ids[i] = fmt.Sprint(r.json(t)["id"])
	}
	w := startWorker(t, buildExamples(t), svc.cli.url(""), svc.key, "-module", "acme.echo")
	first := pollExecution(t, c, ids[0], 30*time.Second, terminal)
	repeat := pollExecution(t, c, ids[1], 30*time.Second, terminal)
	if first["status"] != "COMPLETED" || repeat["status"] != "COMPLETED" ||
		fmt.Sprint(repeat["output"]) != fmt.Sprint(first["output"]) || fmt.Sprint(first["output"]) != "map[echo:map[hi:1]]" {
		t.Fatalf("first %v, repeat %v", first, repeat)
	}
	if fmt.Sprint(first["totalUsage"]) == "0" || fmt.Sprint(repeat["totalUsage"]) != "0" {
		t.Fatalf("usage: first %v, repeat %v (want the repeat free)", first["totalUsage"], repeat["totalUsage"])
	}
	if n := w.printed("started "); n != 1 || w.printed(ids[1]) != 0 {
		t.Fatalf("the worker started %d tasks, want 1 (the first call's)", n)
	}
}

// A workflow whose FOR_EACH body is a workspace module run by a worker completes, each
// iteration run once by the worker, and a key scoped to the workflow leases its stages.
func TestForEachOverAWorkerModule(t *testing.T) {
	const n = 20
	svc := startSDKService(t, 100)
	registerWorkerModule(t, svc, svc.key.WorkspaceID, "acme.echo", "")
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "each via worker", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items", "concurrency": 5}},
		{"id": "work", "module": "acme.echo"}],
	  "edges": [{"from": "t", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item"}}]}`)
	scoped := svc.newKey(t, svc.key.WorkspaceID, "--allowed-workflow", wf["id"].(string))
	w := startWorker(t, buildExamples(t), svc.cli.url(""), scoped, "-module", "acme.echo")
	items := make([]string, n)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	c := svc.caller(t, svc.key)
	m := pollRun(t, c, c.trigger(t, wf["id"].(string), `{"items": [`+strings.Join(items, ",")+`]}`), 60*time.Second, terminal)
	if m["status"] != "COMPLETED" || m["totalUsage"] != float64(n) {
		t.Fatalf("run %v %v", m["status"], m["totalUsage"])
	}
	seen := map[float64]bool{}
	for _, s := range stages(m) {
		if s["referenceId"] != "work" {
			continue
		}
		out := s["output"].(map[string]any)["echo"].(map[string]any)
		if s["status"] != "COMPLETED" || seen[out["n"].(float64)] {
			t.Fatalf("iteration stage %v", s)
		}
		seen[out["n"].(float64)] = true
		if got := w.printed("started " + fmt.Sprint(s["executionEventId"])); got != 1 {
			t.Fatalf("stage %v ran %d times", s["id"], got)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d iterations completed, want %d", len(seen), n)
	}
}

// A run cancelled while a worker holds one of its stages: the worker's next heartbeat hears
// cancelRequested, its handler's context ends, and the task is failed, not completed.
func TestCancelledRunReachesTheWorker(t *testing.T) {
	svc := startSDKService(t, 10)
	registerWorkerModule(t, svc, svc.key.WorkspaceID, "acme.echo", "")
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, `{"name": "slow via worker", "components": [
		{"id": "t", "module": "ON_API_CALLED"}, {"id": "work", "module": "acme.echo"}],
	  "edges": [{"from": "t", "to": "work"}]}`)
	w := startWorker(t, buildExamples(t), svc.cli.url(""), svc.key, "-module", "acme.echo", "-delay", "1h", "-heartbeat", "200ms")
	c := svc.caller(t, svc.key)
	runID := c.trigger(t, wf["id"].(string), `{}`)
	w.await(t, 30*time.Second, "started ")
	mustStatus(t, c.post("/v1/sdk/workflows/executions/"+runID+"/cancel", `{"reason":"test"}`), http.StatusOK, "cancel")
	// The cancellation reaches the handler with the worker's next heartbeat.
	w.await(t, 60*time.Second, "failed ")
	if w.printed("completed ") != 0 {
		t.Fatal("the cancelled run's task completed")
	}
}

// Several completions in one request (POST /v1/sdk/tasks/complete): each is decided as on its
// task's own route and answered in order, with a 200 for the request. A valid output
// completes its task (charged once); an output that breaks the outputSchema is refused naming
// the completion's place and field, and that task stays leased; another workspace's task is
// 404; a task completed already is 409; a malformed list is 400 and records nothing.
func TestCompletionsOfSeveralTasksInOneRequest(t *testing.T) {
	svc := startSDKService(t, 10)
	registerWorkerModule(t, svc, svc.key.WorkspaceID, "acme.typed", `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`)
	c := svc.caller(t, svc.key)
	ids := submitTasks(t, c, "acme.typed", 3, 1)
	r := c.post("/v1/sdk/tasks/poll", `{"modules":["acme.typed"],"max":10,"waitMs":10000,"workerId":"w1"}`)
	mustStatus(t, r, http.StatusOK, "poll")
	tasks := r.json(t)["tasks"].([]any)
	for len(tasks) < 3 {
		r = c.post("/v1/sdk/tasks/poll", `{"modules":["acme.typed"],"max":10,"waitMs":10000,"workerId":"w1"}`)
		mustStatus(t, r, http.StatusOK, "poll")
		tasks = append(tasks, r.json(t)["tasks"].([]any)...)
	}
	taskID := func(i int) string { return tasks[i].(map[string]any)["taskId"].(string) }
	byExecution := map[string]string{}
	for i := range tasks {
		byExecution[tasks[i].(map[string]any)["executionId"].(string)] = taskID(i)
	}

	wantErrorBody(t, c.post("/v1/sdk/tasks/complete", `{"tasks":[]}`), http.StatusBadRequest, "tasks")
	wantErrorBody(t, c.post("/v1/sdk/tasks/complete", `{"tasks":[{"taskId":"`+taskID(0)+`","output":1,"extra":1}]}`), http.StatusBadRequest, "tasks[0].extra")
	wantErrorBody(t, c.post("/v1/sdk/tasks/complete", `{"tasks":[{"taskId":"`+taskID(0)+`","output":{"n":1}},{"taskId":"`+taskID(0)+`","output":{"n":1}}]}`),
		http.StatusBadRequest, "tasks[1].taskId")

	body := fmt.Sprintf(`{"tasks":[{"taskId":%q,"output":{"n":1}},{"taskId":%q,"output":{"n":"two"}},{"taskId":"no-such-task","output":{}},{"taskId":%q,"output":{"n":3}}]}`,
		byExecution[ids[0]], byExecution[ids[1]], byExecution[ids[2]])
	r = c.post("/v1/sdk/tasks/complete", body)
	mustStatus(t, r, http.StatusOK, "completions")
	results := r.json(t)["results"].([]any)
	if len(results) != 4 {
		t.Fatalf("results: %s", r.body)
	}
	item := func(i int) map[string]any { return results[i].(map[string]any) }
	if item(0)["taskId"] != byExecution[ids[0]] || item(0)["status"] != "COMPLETED" || item(3)["status"] != "COMPLETED" {
		t.Fatalf("completed: %s", r.body)
	}
	if e, _ := item(1)["error"].(map[string]any); e == nil || e["statusCode"] != float64(400) || !strings.Contains(e["message"].(string), "tasks[1].output.n") {
		t.Fatalf("a refused output: %s", r.body)
	}
	if e, _ := item(2)["error"].(map[string]any); e == nil || e["statusCode"] != float64(404) {
		t.Fatalf("an unknown task: %s", r.body)
	}
	// The refused output's task is still leased: it completes on its own route; the others
	// are completed, so their completions are now 409.
	mustStatus(t, c.post("/v1/sdk/tasks/"+byExecution[ids[1]]+"/complete", `{"output":{"n":2}}`), http.StatusOK, "complete after a refused output")
	r = c.post("/v1/sdk/tasks/complete", fmt.Sprintf(`{"tasks":[{"taskId":%q,"output":{"n":9}},{"taskId":%q,"output":{"n":9}}]}`, byExecution[ids[0]], byExecution[ids[1]]))
	mustStatus(t, r, http.StatusOK, "completions of completed tasks")
	for i, res := range r.json(t)["results"].([]any) {
		if e, _ := res.(map[string]any)["error"].(map[string]any); e == nil || e["statusCode"] != float64(409) {
			t.Fatalf("completion %d of a completed task: %s", i, r.body)
		}
	}
	for i, id := range ids {
		m := pollExecution(t, c, id, 30*time.Second, terminal)
		if m["status"] != "COMPLETED" || fmt.Sprint(m["output"]) != fmt.Sprintf("map[n:%d]", i+1) || m["totalUsage"] != float64(1) {
			t.Fatalf("execution %d: %v", i, m)
		}
	}
	if total := auditTotal(t, svc.cli, svc.key.WorkspaceID); total != 7 {
		t.Fatalf("balance %v after 3 calls, want 7", total)
	}
}

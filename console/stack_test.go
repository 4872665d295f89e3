package console_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/console"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/executor"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/reactors/scheduler"
	"github.com/switchyard/switchyard/reactors/webhooks"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/server"
	"github.com/switchyard/switchyard/testenv"
)

// stack is the whole service in process, built by httpapi.Routes as serve builds it: real
// Postgres, projections, executor, scheduler, webhook dispatcher (trusting a local HTTPS
// receiver), live hub, identity and the console.
type stack struct {
	env    *testenv.Env
	srv    *httptest.Server
	sealer *seal.Sealer
	hook   *httptest.Server
	ws     string
	owner  person
	member person
	// The data the pages must show, made by a real run of the service.
	workflowID, workflowName string
	runID, slowRunID         string
	slowWorkflowID           string
	executionID              string
	// workers is what the workers page is told of the workers seen.
	workers atomic.Pointer[[]console.Worker]
}

type person struct{ ID, Email string }

const password = "console-password-1"

func quiet() logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return l
}

func newStack(t *testing.T) *stack {
	t.Helper()
	env := testenv.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := quiet()
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category, run.Category}}, log)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	reg := modules.Builtins(modules.BuiltinsConfig{})
	key, _ := seal.GenerateKey()
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{env: env, sealer: sealer}
	// Module secrets are sealed by the commands (the modules page registers signed modules).
	env.Cmds = commands.New(env.Store, commands.WithSealer(sealer))
	// The receiver takes every callback but those to a path ending in /fail.
	s.hook = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.hook.Close)
	testenv.Go(t, scheduler.New(env.Store, env.Cmds, env.Queries, scheduler.Config{SweepInterval: 100 * time.Millisecond,
		SweepGrace: 200 * time.Millisecond, Logger: log}).Run)
	ex := executor.New(env.Store, env.Cmds, env.Queries, reg, hub, executor.Config{SweepInterval: 100 * time.Millisecond,
		SweepGrace: 100 * time.Millisecond, DrainTimeout: time.Second, Logger: log})
	env.Cmds = commands.WithRunner(env.Cmds, ex)
	testenv.Go(t, ex.Run)
	testenv.Go(t, webhooks.New(env.Store, env.Cmds, env.Queries, sealer, webhooks.Config{AllowPrivate: true, RootCAs: rootsOf(s.hook),
		SweepInterval: 50 * time.Millisecond, SweepGrace: 50 * time.Millisecond, Logger: log}).Run)

	var handler http.Handler
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(s.srv.Close)
	idp, err := identity.New(identity.Config{Issuer: s.srv.URL, Cmds: env.Cmds, Queries: env.Queries, Sealer: sealer, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := idp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	routes, err := server.Routes(server.RoutesConfig{Server: httpapi.ServerConfig{Logger: log}, Cmds: env.Cmds, Queries: env.Queries,
		Registry: reg, Hub: hub, Identity: idp, Workers: func(string) []console.Worker {
			if w := s.workers.Load(); w != nil {
				return *w
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	handler = routes.Handler()
	return s
}

// seed makes the workspace, its people and real data: a workflow run to completion, a slow
// run still going, an execution whose callback was delivered, and billing history.
func (s *stack) seed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(ctx, s.ws, billing.FromWhole(100), "welcome-credit"); err != nil {
		t.Fatal(err)
	}
	s.workflowName = "Nightly import"
	wf := s.workflow(t, `{"name": "Nightly import", "description": "Prepares the day's orders, then handles each.", "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 40]},
		{"id": "a", "name": "Prepare", "module": "core.echo", "position": [260, 40]},
		{"id": "each", "name": "Each order", "module": "FOR_EACH", "config": {"items": "items"}, "position": [520, 40]},
		{"id": "work", "name": "Handle order", "module": "core.echo", "position": [780, 40]}],
	  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "each"}, {"from": "each", "to": "work", "mapping": {"n": "item"}}]}`)
	s.workflowID = wf.ID
	s.runID = s.trigger(t, wf.ID, `{"items": [1, 2, 3]}`)
	s.slowWorkflowID = s.workflow(t, `{"name": "Slow report", "components": [
		{"id": "t", "name": "API call", "module": "ON_API_CALLED", "position": [0, 0]},
		{"id": "d1", "name": "Gather", "module": "core.delay", "config": {"ms": 10000}, "position": [260, 0]},
		{"id": "d2", "name": "Summarise", "module": "core.delay", "config": {"ms": 10000}, "position": [520, 0]},
		{"id": "d3", "name": "Publish", "module": "core.delay", "config": {"ms": 10000}, "position": [780, 0]}],
	  "edges": [{"from": "t", "to": "d1"}, {"from": "d1", "to": "d2"}, {"from": "d2", "to": "d3"}]}`).ID
	s.slowRunID = s.trigger(t, s.slowWorkflowID, `{}`)
	s.executionID = s.callbackExecution(t)
	testenv.Eventually(t, 60*time.Second, "the run to complete", func() bool {
		st, err := s.env.Cmds.Workflows.Run(ctx, s.runID)
		return err == nil && st.Status == run.StatusCompleted
	})
	testenv.Eventually(t, 30*time.Second, "the callback to be delivered", func() bool {
		a, err := s.env.Cmds.Webhooks.WebhookAttempts(ctx, s.executionID)
		return err == nil && len(a) > 0 && a[len(a)-1].Delivered
	})
	for _, p := range []string{"runs", "executions", "billing", "workflowlist", "workspaces", "webhooks"} {
		s.env.CaughtUp(t, p)
	}
}

// seedPeople makes the workspace with its owner and a member, and nothing else.
func (s *stack) seedPeople(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	s.owner, s.member = s.person(t, "owner"), s.person(t, "member")
	var err error
	if s.ws, err = s.env.Cmds.Workspaces.CreateWorkspace(ctx, "Acme Logistics", s.owner.Email); err != nil {
		t.Fatal(err)
	}
	if err := s.env.Cmds.Workspaces.AddMember(ctx, s.ws, s.member.Email, "member"); err != nil {
		t.Fatal(err)
	}
}

func (s *stack) person(t *testing.T, role string) person {
	t.Helper()
	email := fmt.Sprintf("%s-%s@example.com", role, uuid.NewString()[:6])
	name := map[string]string{"owner": "Olivia Owner", "member": "Milo Member", "admin": "Ada Admin"}[role]
	id, err := s.env.Cmds.Identity.RegisterUser(context.Background(), commands.RegisterUser{Email: email, Password: password, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return person{ID: id, Email: email}
}

func (s *stack) workflow(t *testing.T, def string) workflow.State {
	t.Helper()
	var d workflow.Definition
	if err := json.Unmarshal([]byte(def), &d); err != nil {
		t.Fatal(err)
	}
	wf, err := s.env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: s.ws, Definition: d})
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func (s *stack) trigger(t *testing.T, workflowID, input string) string {
	t.Helper()
	runs, err := s.env.Cmds.Workflows.TriggerWorkflow(context.Background(), commands.TriggerWorkflow{WorkspaceID: s.ws, WorkflowID: workflowID,
		Input: json.RawMessage(input)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("trigger: %v %v", runs, err)
	}
	return runs[0].RunID
}

// callbackExecution submits an execution with an HTTPS callback to the local receiver.
func (s *stack) callbackExecution(t *testing.T) string {
	t.Helper()
	return s.callbackTo(t, "/hooks/switchyard")
}

// callbackTo submits an execution whose callback goes to path on the local receiver.
func (s *stack) callbackTo(t *testing.T, path string) string {
	t.Helper()
	// Through a handler that seals, as serve's does (commands.WithSealer).
	cmds := commands.New(s.env.Store, commands.WithSealer(s.sealer))
	st, err := cmds.Executions.SubmitExecution(context.Background(), commands.SubmitExecution{WorkspaceID: s.ws, Module: "core.echo",
		Input: json.RawMessage(`{"order": "A-1042", "lines": 3}`), Config: json.RawMessage(`{}`), Attempts: 1,
		Callback: commands.CallbackRequest{URL: s.hook.URL + path, Secret: "callback-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	return st.ID
}

// client is a cookie-carrying HTTP client signed in as p through the sign-in form, not
// following redirects.
func (s *stack) client(t *testing.T, p person) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"csrf_token": {s.csrfFrom(t, c, "/login")}, "email": {p.Email}, "password": {password}, "return_to": {"/"}}
	resp, err := c.PostForm(s.srv.URL+"/login", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in as %s: %d", p.Email, resp.StatusCode)
	}
	return c
}

var csrfFieldRE = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// csrfFrom is the CSRF token of the form on page path, made for the client's session (or, on
// the sign-in page, for its CSRF cookie).
func (s *stack) csrfFrom(t *testing.T, c *http.Client, path string) string {
	t.Helper()
	st, body := s.get(t, c, path)
	m := csrfFieldRE.FindStringSubmatch(body)
	if st != http.StatusOK || m == nil {
		t.Fatalf("no CSRF token on %s: %d", path, st)
	}
	return html.UnescapeString(m[1])
}

func (s *stack) get(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	resp, err := c.Get(s.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp)
}

func (s *stack) post(t *testing.T, c *http.Client, path string, form url.Values) (int, string) {
	t.Helper()
	if form.Get("csrf_token") == "" {
		form.Set("csrf_token", s.csrfFrom(t, c, "/logout"))
	}
	resp, err := c.PostForm(s.srv.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp)
}

func readAll(resp *http.Response) string {
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return b.String()
}

func rootsOf(srv *httptest.Server) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(srv.Certificate())
	return p
}

package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/client/webhook"
	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/hook"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/identity"
)

// hookStack is the workspace endpoints and POST /hooks/{token} in process over a real
// database; the hooks' rate limit reads a clock the test holds still.
type hookStack struct {
	core   testCore
	srv    *httptest.Server
	bearer fakeBearer
	ws     string
}

func newHookStack(t *testing.T, rate float64, burst int) *hookStack {
	t.Helper()
	core := newTestCore(t, false)
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: core.log})
	bearer := fakeBearer{}
	(&httpapi.Workspaces{Cmds: core.env.Cmds, Queries: core.env.Queries, Auth: bearer}).Mount(server.V1)
	still := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	hooks, err := httpapi.NewHooks(httpapi.HooksConfig{Cmds: core.env.Cmds, RatePerSecond: rate, Burst: burst,
		Now: func() time.Time { return still }})
	if err != nil {
		t.Fatal(err)
	}
	hooks.Mount(server.Router)
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	s := &hookStack{core: core, srv: srv, bearer: bearer, ws: core.env.Workspace(t, 1000)}
	st, err := core.env.Cmds.Workspaces.Workspace(context.Background(), s.ws)
	if err != nil {
		t.Fatal(err)
	}
	for id, role := range st.Members {
		if role == "owner" {
			bearer["owner"] = identity.Principal{UserID: id, ClientID: "app", WorkspaceID: s.ws, Scopes: []string{identity.ScopeWorkspaceAdmin}}
		}
	}
	return s
}

func (s *hookStack) api(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+"/v1/workspaces/"+s.ws+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer owner")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// savedHooks is a save's answer: the workflow's id and the hooks the save issued.
type savedHooks struct {
	ID    string                `json:"id"`
	Hooks []commands.IssuedHook `json:"hooks"`
}

// webhookWorkflow saves a workflow whose one component is an ON_WEBHOOK of config and returns
// its id and the hook the save issued.
func (s *hookStack) webhookWorkflow(t *testing.T, config string) (string, commands.IssuedHook) {
	t.Helper()
	body := fmt.Sprintf(`{"name": "hooked-%d", "components": [{"id": "hook", "module": "ON_WEBHOOK", "config": %s}]}`, time.Now().UnixNano(), config)
	code, raw := s.api(t, http.MethodPost, "/workflows", body)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	var saved savedHooks
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	if len(saved.Hooks) != 1 || saved.Hooks[0].Token == "" || saved.Hooks[0].Secret == "" || saved.Hooks[0].URL != "/hooks/"+saved.Hooks[0].Token {
		t.Fatalf("the save issued no hook: %s", raw)
	}
	return saved.ID, saved.Hooks[0]
}

// post delivers body to url with headers and decodes the answer.
func (s *hookStack) post(t *testing.T, url string, headers map[string]string, body []byte) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp, out
}

// runInput is the trigger body of the run with id; ok is false when no such run exists.
func (s *hookStack) runInput(t *testing.T, id string) (map[string]any, bool) {
	t.Helper()
	r, err := s.core.env.Cmds.Workflows.Run(context.Background(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(r.Input, &in); err != nil {
		t.Fatal(err)
	}
	return in, true
}

// Signers of the three schemes, as a sender computes them (docs/workflows.md).

func standardHeaders(secret, id string, at time.Time, body []byte) map[string]string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	ts := strconv.FormatInt(at.Unix(), 10)
	return map[string]string{"webhook-id": id, "webhook-timestamp": ts,
		"webhook-signature": "v0,ignored " + hook.SignStandard(key, id, ts, body)}
}

func v1Headers(secret, deliveryID string, at time.Time, body []byte) map[string]string {
	ts := at.UTC().Format("2006-01-02T15:04:05.000Z")
	h := map[string]string{"x-signature-version": "v1", "x-signature-timestamp": ts, "x-signature": webhook.Sign(secret, ts, body)}
	if deliveryID != "" {
		h["x-delivery-id"] = deliveryID
	}
	return h
}

func githubHeaders(secret, deliveryID string, body []byte) map[string]string {
	return map[string]string{"X-Hub-Signature-256": hook.SignGitHub(secret, body), "X-GitHub-Delivery": deliveryID, "X-GitHub-Event": "push"}
}

// deliver posts a delivery that must start one run, and returns the run's id.
func (s *hookStack) deliver(t *testing.T, url string, headers map[string]string, body []byte) string {
	t.Helper()
	resp, out := s.post(t, url, headers, body)
	return firstRun(t, resp, out)
}

func firstRun(t *testing.T, resp *http.Response, out map[string]any) string {
	t.Helper()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery: %d %v", resp.StatusCode, out)
	}
	runs, _ := out["runs"].([]any)
	if len(runs) != 1 {
		t.Fatalf("delivery started %d runs: %v", len(runs), out)
	}
	return runs[0].(map[string]any)["runId"].(string)
}

func TestHookSchemesStartRunsWithTheirBody(t *testing.T) {
	s := newHookStack(t, 1000, 1000)
	body := []byte(`{"action": "opened", "number": 7, "big": 12345678901234567890}`)
	t.Run("standard-webhooks with a transform", func(t *testing.T) {
		wf, h := s.webhookWorkflow(t, `{"scheme": "standard-webhooks", "transform": "{action, next: (.number + 1)}"}`)
		resp, out := s.post(t, h.URL, standardHeaders(h.Secret, "msg_1", time.Now(), body), body)
		id := firstRun(t, resp, out)
		if id != commands.DerivedRunID("delivery", wf, "hook", "msg_1") || out["deliveryId"] != "msg_1" {
			t.Fatalf("run %s of delivery %v, want the run derived from webhook-id msg_1", id, out["deliveryId"])
		}
		in, ok := s.runInput(t, id)
		if !ok || in["action"] != "opened" || in["next"] != float64(8) || len(in) != 2 {
			t.Fatalf("trigger body %v, want the transformed body", in)
		}
	})
	t.Run("hmac-sha256-v1", func(t *testing.T) {
		_, h := s.webhookWorkflow(t, `{"scheme": "hmac-sha256-v1"}`)
		resp, out := s.post(t, h.URL, v1Headers(h.Secret, "exec-1:1", time.Now(), body), body)
		in, ok := s.runInput(t, firstRun(t, resp, out))
		if !ok || in["action"] != "opened" || in["number"] != float64(7) {
			t.Fatalf("trigger body %v, want the body as sent", in)
		}
	})
	t.Run("github", func(t *testing.T) {
		_, h := s.webhookWorkflow(t, `{"scheme": "github"}`)
		resp, out := s.post(t, h.URL, githubHeaders(h.Secret, "72d3162e-cc78-11e3-81ab-4c9367dc0958", body), body)
		r, err := s.core.env.Cmds.Workflows.Run(context.Background(), firstRun(t, resp, out))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Input, body) {
			t.Fatalf("trigger body %s, want the bytes as sent %s (large numbers kept)", r.Input, body)
		}
	})
}

func TestHookBadSignatureIsRefusedAndRecordsNothing(t *testing.T) {
	s := newHookStack(t, 1000, 1000)
	body := []byte(`{"ref": "main"}`)
	wf, gh := s.webhookWorkflow(t, `{"scheme": "github"}`)
	_, std := s.webhookWorkflow(t, `{"scheme": "standard-webhooks"}`)
	_, v1 := s.webhookWorkflow(t, `{"scheme": "hmac-sha256-v1"}`)
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("not-the-secret-of-this-hook-xxxx"))
	cases := []struct {
		name    string
		url     string
		headers map[string]string
	}{
		{"github, another secret", gh.URL, githubHeaders(other, "d-1", body)},
		{"github, no signature", gh.URL, map[string]string{"X-GitHub-Delivery": "d-1"}},
		{"github, signature of another body", gh.URL, githubHeaders(gh.Secret, "d-1", []byte(`{"ref": "dev"}`))},
		{"standard, another secret", std.URL, standardHeaders(other, "d-1", time.Now(), body)},
		{"standard, stale timestamp", std.URL, standardHeaders(std.Secret, "d-1", time.Now().Add(-6*time.Minute), body)},
		{"standard, no id", std.URL, func() map[string]string {
			h := standardHeaders(std.Secret, "d-1", time.Now(), body)
			delete(h, "webhook-id")
			return h
		}()},
		{"v1, another secret", v1.URL, v1Headers(other, "d-1", time.Now(), body)},
		{"v1, stale timestamp", v1.URL, v1Headers(v1.Secret, "d-1", time.Now().Add(-6*time.Minute), body)},
		{"v1, no signature", v1.URL, map[string]string{"x-delivery-id": "d-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := s.post(t, tc.url, tc.headers, body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d %v, want 401", resp.StatusCode, out)
			}
		})
	}
	runID := commands.DerivedRunID("delivery", wf, "hook", "d-1")
	if _, ok := s.runInput(t, runID); ok {
		t.Fatal("a refused delivery started a run")
	}
	// The same delivery signed right starts exactly that run: the check above looked in the
	// right place.
	resp, out := s.post(t, gh.URL, githubHeaders(gh.Secret, "d-1", body), body)
	if got := firstRun(t, resp, out); got != runID {
		t.Fatalf("run %s, want %s", got, runID)
	}
}

func TestHookRedeliveryStartsOneRun(t *testing.T) {
	s := newHookStack(t, 1000, 1000)
	body := []byte(`{"n": 1}`)
	_, gh := s.webhookWorkflow(t, `{"scheme": "github"}`)
	first := s.deliver(t, gh.URL, githubHeaders(gh.Secret, "same", body), body)
	again := s.deliver(t, gh.URL, githubHeaders(gh.Secret, "same", body), body)
	if first != again {
		t.Fatalf("a redelivery started run %s beside %s", again, first)
	}
	other := s.deliver(t, gh.URL, githubHeaders(gh.Secret, "another", body), body)
	if other == first {
		t.Fatal("another delivery id gave the same run")
	}
	// Without a delivery id the body's hash names the delivery.
	_, v1 := s.webhookWorkflow(t, `{"scheme": "hmac-sha256-v1"}`)
	a := s.deliver(t, v1.URL, v1Headers(v1.Secret, "", time.Now(), body), body)
	b := s.deliver(t, v1.URL, v1Headers(v1.Secret, "", time.Now().Add(time.Second), body), body)
	if a != b {
		t.Fatalf("the same body without a delivery id started runs %s and %s", a, b)
	}
}

func TestHookBodyOverOneMiBIs413(t *testing.T) {
	s := newHookStack(t, 1000, 1000)
	wf, gh := s.webhookWorkflow(t, `{"scheme": "github"}`)
	big := []byte(`{"pad": "` + strings.Repeat("a", httpapi.MaxHookBodyBytes) + `"}`)
	resp, out := s.post(t, gh.URL, githubHeaders(gh.Secret, "big", big), big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d %v, want 413", resp.StatusCode, out)
	}
	if _, ok := s.runInput(t, commands.DerivedRunID("delivery", wf, "hook", "big")); ok {
		t.Fatal("a body over the limit started a run")
	}
	// Just under the limit passes.
	fits := []byte(`{"pad": "` + strings.Repeat("a", httpapi.MaxHookBodyBytes-20) + `"}`)
	s.deliver(t, gh.URL, githubHeaders(gh.Secret, "fits", fits), fits)
}

func TestHookRateLimitPerHook(t *testing.T) {
	s := newHookStack(t, 1, 2)
	body := []byte(`{}`)
	_, a := s.webhookWorkflow(t, `{"scheme": "github"}`)
	_, b := s.webhookWorkflow(t, `{"scheme": "github"}`)
	for i := range 2 {
		s.deliver(t, a.URL, githubHeaders(a.Secret, fmt.Sprint(i), body), body)
	}
	resp, out := s.post(t, a.URL, githubHeaders(a.Secret, "3", body), body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d (Retry-After %q) %v, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), out)
	}
	// Another hook has a bucket of its own.
	s.deliver(t, b.URL, githubHeaders(b.Secret, "1", body), body)
}

func TestHookRotationRetiresTheOldToken(t *testing.T) {
	s := newHookStack(t, 1000, 1000)
	body := []byte(`{"x": 1}`)
	wf, old := s.webhookWorkflow(t, `{"scheme": "github"}`)
	code, raw := s.api(t, http.MethodPost, "/workflows/"+wf+"/hooks/hook/rotate", "")
	if code != http.StatusOK {
		t.Fatalf("rotate: %d %s", code, raw)
	}
	var fresh commands.IssuedHook
	if err := json.Unmarshal(raw, &fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.Token == old.Token || fresh.Secret == old.Secret || fresh.URL != "/hooks/"+fresh.Token {
		t.Fatalf("rotation gave %+v", fresh)
	}
	if resp, out := s.post(t, old.URL, githubHeaders(old.Secret, "1", body), body); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("old token: %d %v, want 404", resp.StatusCode, out)
	}
	if resp, out := s.post(t, fresh.URL, githubHeaders(old.Secret, "1", body), body); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("new token, old secret: %d %v, want 401", resp.StatusCode, out)
	}
	s.deliver(t, fresh.URL, githubHeaders(fresh.Secret, "1", body), body)

	// A sender that draws its own secret (Standard Webhooks) hands it over at rotation.
	swf, _ := s.webhookWorkflow(t, `{"scheme": "standard-webhooks"}`)
	theirs := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the sender's own secret, 32 byte"))
	code, raw = s.api(t, http.MethodPost, "/workflows/"+swf+"/hooks/hook/rotate", `{"secret": "`+theirs+`"}`)
	if code != http.StatusOK {
		t.Fatalf("rotate with a secret: %d %s", code, raw)
	}
	var given commands.IssuedHook
	_ = json.Unmarshal(raw, &given)
	s.deliver(t, given.URL, standardHeaders(theirs, "m1", time.Now(), body), body)
	if code, raw := s.api(t, http.MethodPost, "/workflows/"+swf+"/hooks/hook/rotate", `{"secret": "short"}`); code != http.StatusBadRequest || !strings.Contains(string(raw), "secret") {
		t.Fatalf("a short secret: %d %s, want 400 naming secret", code, raw)
	}

	// The list shows each hook without its credentials.
	code, raw = s.api(t, http.MethodGet, "/workflows/"+wf+"/hooks", "")
	if code != http.StatusOK || strings.Contains(string(raw), fresh.Token) || strings.Contains(string(raw), fresh.Secret) {
		t.Fatalf("list: %d %s", code, raw)
	}
	var list struct{ Hooks []commands.HookView }
	_ = json.Unmarshal(raw, &list)
	if len(list.Hooks) != 1 || !list.Hooks[0].Issued || !strings.HasPrefix(fresh.URL, list.Hooks[0].URLPrefix) || list.Hooks[0].RotatedAt == nil {
		t.Fatalf("list: %s", raw)
	}
	// Saving the workflow again issues nothing new: its hook stays.
	code, raw = s.api(t, http.MethodPut, "/workflows/"+wf, `{"name": "renamed-`+wf+`", "components": [{"id": "hook", "module": "ON_WEBHOOK", "config": {"scheme": "github"}}]}`)
	if code != http.StatusOK || strings.Contains(string(raw), `"hooks"`) {
		t.Fatalf("update: %d %s, want no hooks issued", code, raw)
	}
	s.deliver(t, fresh.URL, githubHeaders(fresh.Secret, "2", body), body)
}

func TestHookUnknownTokenIs404(t *testing.T) {
	s := newHookStack(t, 1000, 1000)
	_, h := s.webhookWorkflow(t, `{"scheme": "github"}`)
	body := []byte(`{}`)
	id, _ := commands.HookKey(h.Token)
	sum := sha256.Sum256([]byte("guess"))
	for _, token := range []string{"nope", hook.Prefix + id + "_" + hex.EncodeToString(sum[:]), strings.ToUpper(h.Token)} {
		if resp, out := s.post(t, "/hooks/"+token, githubHeaders(h.Secret, "1", body), body); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("token %q: %d %v, want 404", token, resp.StatusCode, out)
		}
	}
}

func TestHookTransformErrors(t *testing.T) {
	s := newHookStack(t, 1000, 1000)
	code, raw := s.api(t, http.MethodPost, "/workflows", `{"name": "bad-jq", "components": [{"id": "hook", "module": "ON_WEBHOOK", "config": {"scheme": "github", "transform": "{a: "}}]}`)
	if code != http.StatusBadRequest || !strings.Contains(string(raw), "config.transform") {
		t.Fatalf("a transform that does not compile: %d %s, want 400 naming config.transform", code, raw)
	}
	code, raw = s.api(t, http.MethodPost, "/workflows", `{"name": "bad-scheme", "components": [{"id": "hook", "module": "ON_WEBHOOK", "config": {"scheme": "stripe"}}]}`)
	if code != http.StatusBadRequest || !strings.Contains(string(raw), "config.scheme") {
		t.Fatalf("an unknown scheme: %d %s, want 400 naming config.scheme", code, raw)
	}
	cases := []struct{ name, transform, body, want string }{
		{"not an object", `.items`, `{"items": [1, 2]}`, "must give a JSON object"},
		{"runtime error", `{n: (.s + 1)}`, `{"s": "text"}`, "transform: jq"},
		{"no result", `empty`, `{}`, "gave no result"},
		{"several results", `.a[] | {v: .}`, `{"a": [1, 2]}`, "several results"},
		{"body not JSON", `.`, `not json`, "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wf, h := s.webhookWorkflow(t, fmt.Sprintf(`{"scheme": "github", "transform": %q}`, tc.transform))
			resp, out := s.post(t, h.URL, githubHeaders(h.Secret, "t", []byte(tc.body)), []byte(tc.body))
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["message"]), tc.want) {
				t.Fatalf("%d %v, want 400 with %q", resp.StatusCode, out, tc.want)
			}
			if _, ok := s.runInput(t, commands.DerivedRunID("delivery", wf, "hook", "t")); ok {
				t.Fatal("a delivery the transform refused started a run")
			}
		})
	}
	// Without a transform, a body that is not an object is refused the same way.
	_, h := s.webhookWorkflow(t, `{"scheme": "github"}`)
	if resp, out := s.post(t, h.URL, githubHeaders(h.Secret, "t", []byte(`[1]`)), []byte(`[1]`)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("array body: %d %v, want 400", resp.StatusCode, out)
	}
}

// send is one request with headers, answered raw, for checks against the document.
func (s *hookStack) send(t *testing.T, method, url string, headers map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

func TestHookAnswersMatchTheDocument(t *testing.T) {
	s := newHookStack(t, 1000, 1000)
	spec := loadSpec(t)
	owner := map[string]string{"Authorization": "Bearer owner"}
	ws := "/v1/workspaces/" + s.ws
	resp, raw := s.send(t, http.MethodPost, ws+"/workflows", owner,
		[]byte(`{"name": "documented", "components": [{"id": "hook", "module": "ON_WEBHOOK", "config": {"scheme": "github"}}], "edges": []}`))
	saved := conforms(t, spec, resp, raw, http.StatusCreated)
	wf := saved["id"].(string)
	resp, raw = s.send(t, http.MethodGet, ws+"/workflows/"+wf+"/hooks", owner, nil)
	conforms(t, spec, resp, raw, http.StatusOK)
	resp, raw = s.send(t, http.MethodPost, ws+"/workflows/"+wf+"/hooks/hook/rotate", owner, nil)
	var h commands.IssuedHook
	_ = json.Unmarshal(raw, &h)
	conforms(t, spec, resp, raw, http.StatusOK)
	resp, raw = s.send(t, http.MethodPost, ws+"/workflows/"+wf+"/hooks/nope/rotate", owner, nil)
	conforms(t, spec, resp, raw, http.StatusNotFound)
	body := []byte(`{"a": 1}`)
	resp, raw = s.send(t, http.MethodPost, h.URL, githubHeaders(h.Secret, "doc", body), body)
	conforms(t, spec, resp, raw, http.StatusAccepted)
	resp, raw = s.send(t, http.MethodPost, h.URL, githubHeaders("wrong-secret-wrong", "doc", body), body)
	conforms(t, spec, resp, raw, http.StatusUnauthorized)
	resp, raw = s.send(t, http.MethodPost, "/hooks/nope", nil, body)
	conforms(t, spec, resp, raw, http.StatusNotFound)
}

package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// plant appends an execution's events as they were stored, past every check a submit makes now.
func (s *stack) plant(t *testing.T, events ...domain.Event) {
	t.Helper()
	data := make([]eventstore.EventData, len(events))
	for i, e := range events {
		b, err := domain.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		data[i] = eventstore.EventData{ID: uuid.New(), Type: e.EventType(), Data: b}
	}
	id := events[0].(execution.Submitted).ExecutionID
	if _, err := s.env.Store.Append(context.Background(), commands.ExecutionStream(id), eventstore.NoStream(), data...); err != nil {
		t.Fatal(err)
	}
}

// compact is doc without the white space jsonb puts in when it gives a document back.
func compact(t *testing.T, doc string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(doc)); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return b.String()
}

// pageBound is more than a page with every document at its cap needs, and far less than the
// unbounded pages: 3000 nested arrays alone indented to 18 MB.
const pageBound = 400 << 10

// Issue 26 item 3: an execution stored with a deeply nested input, a large output and a deep
// error (planted directly, as older versions accepted them) renders a page of bounded size that
// says what it left out, and the whole documents download, to the workspace's members only.
func TestStoredDocumentsRenderBoundedPages(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	s.owner, s.member = s.person(t, "owner"), s.person(t, "member")
	outsider := s.person(t, "owner")
	var err error
	if s.ws, err = s.env.Cmds.Workspaces.CreateWorkspace(ctx, "Deep", s.owner.Email); err != nil {
		t.Fatal(err)
	}
	if err := s.env.Cmds.Workspaces.AddMember(ctx, s.ws, s.member.Email, "member"); err != nil {
		t.Fatal(err)
	}
	other, err := s.env.Cmds.Workspaces.CreateWorkspace(ctx, "Elsewhere", outsider.Email)
	if err != nil {
		t.Fatal(err)
	}
	deep := `{"a":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}`
	var wide strings.Builder
	wide.WriteString(`{"rows":[`)
	for i := range 20000 {
		if i > 0 {
			wide.WriteByte(',')
		}
		fmt.Fprintf(&wide, `{"id":%d,"name":"row %d"}`, i, i)
	}
	wide.WriteString(`]}`)
	now := time.Now().UTC()
	done, failed, foreign := uuid.NewString(), uuid.NewString(), uuid.NewString()
	s.plant(t, execution.Submitted{ExecutionID: done, WorkspaceID: s.ws, Module: "core.echo", Input: json.RawMessage(deep),
		Config: json.RawMessage(`{}`), Attempts: 1, At: now},
		execution.Completed{ExecutionID: done, Attempt: 1, Output: json.RawMessage(wide.String()), NoCallback: true, At: now})
	s.plant(t, execution.Submitted{ExecutionID: failed, WorkspaceID: s.ws, Module: "core.echo", Input: json.RawMessage(`{}`),
		Config: json.RawMessage(`{}`), Attempts: 1, At: now},
		execution.Failed{ExecutionID: failed, Attempt: 1, Error: json.RawMessage(deep), NoCallback: true, At: now})
	s.plant(t, execution.Submitted{ExecutionID: foreign, WorkspaceID: other, Module: "core.echo", Input: json.RawMessage(deep),
		Config: json.RawMessage(`{}`), Attempts: 1, At: now},
		execution.Completed{ExecutionID: foreign, Attempt: 1, Output: json.RawMessage(`{}`), NoCallback: true, At: now})

	owner, member, stranger := s.client(t, s.owner), s.client(t, s.member), s.client(t, outsider)
	base := "/workspaces/" + s.ws + "/executions/"
	for who, c := range map[string]*http.Client{"owner": owner, "member": member} {
		st, page := s.get(t, c, base+done)
		if st != http.StatusOK || len(page) > pageBound {
			t.Fatalf("execution page as %s: %d, %d bytes (at most %d)", who, st, len(page), pageBound)
		}
		for _, want := range []string{`id="input-cut"`, `id="output-cut"`, `href="` + base + done + `/raw/input"`, `href="` + base + done + `/raw/output"`} {
			if !strings.Contains(page, want) {
				t.Fatalf("execution page as %s lacks %s", who, want)
			}
		}
		st, page = s.get(t, c, base+failed)
		if st != http.StatusOK || len(page) > pageBound || !strings.Contains(page, `href="`+base+failed+`/raw/error"`) {
			t.Fatalf("failed execution page as %s: %d, %d bytes", who, st, len(page))
		}
		for part, want := range map[string]string{done + "/raw/input": deep, done + "/raw/output": wide.String(), failed + "/raw/error": deep} {
			resp, err := c.Get(s.srv.URL + base + part)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(resp)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || compact(t, body) != want || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" ||
				!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") {
				t.Fatalf("download %s as %s: %d %q, %d bytes", part, who, resp.StatusCode, resp.Header, len(body))
			}
		}
	}
	// The downloads are guarded as the page is: a person outside the workspace is refused as
	// on the page, another workspace's execution under this workspace's address is not found;
	// nothing there yet is not found either.
	refused, _ := s.get(t, stranger, base+done)
	if refused != http.StatusForbidden {
		t.Fatalf("the execution page for someone outside the workspace: %d", refused)
	}
	for _, tc := range []struct {
		c    *http.Client
		path string
		want int
	}{
		{stranger, base + done + "/raw/input", refused},
		{owner, base + foreign + "/raw/input", http.StatusNotFound},
		{owner, base + foreign, http.StatusNotFound},
		{owner, base + done + "/raw/error", http.StatusNotFound},
		{owner, base + done + "/raw/config", http.StatusNotFound},
	} {
		if st, body := s.get(t, tc.c, tc.path); st != tc.want || strings.Contains(body, "[[[") {
			t.Fatalf("GET %s: %d, want %d", tc.path, st, tc.want)
		}
	}
}

package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/domain/billing"
	httpapi "github.com/switchyard/switchyard/httpapi"
)

// Issue 26 item 4, end to end: waiting submits of one workspace share charge batches, and a
// json.jq output PostgreSQL cannot store (U+0000, a number of 140001 digits) among them ends
// FAILED with output_unstorable within its wait, uncharged, while every ordinary call
// completes within its own wait (the longest there is: the machine running the tests may be
// busy) and is charged once.
func TestUnstorableOutputFailsAloneAndInTime(t *testing.T) {
	s := newGuardStack(t, httpapi.SDKAuthConfig{})
	ws := s.core.env.Workspace(t, 100)
	key := s.key(t, ws)
	const ordinary = 30
	poisoned := []string{`{"query":"{\"a\": \"\\u0000\"}"}`, `{"query":"{\"n\": (\"1\" + \"0\" * 140000 | tonumber)}"}`}
	type answer struct {
		status int
		record struct {
			Status string
			Error  *struct{ Code string }
		}
		body string
	}
	answers := make([]answer, ordinary+len(poisoned))
	var wg sync.WaitGroup
	for i := range answers {
		body := `{"module":"core.echo","input":{"i":` + jsonInt(i) + `},"config":{},"waitForMs":15000}`
		if i >= ordinary {
			body = `{"module":"json.jq","input":{},"config":` + poisoned[i-ordinary] + `,"waitForMs":15000}`
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := s.do(t, key, http.MethodPost, "/v1/sdk/components", body)
			answers[i].status, answers[i].body = resp.StatusCode, string(b)
			_ = json.Unmarshal(b, &answers[i].record)
		}()
	}
	wg.Wait()
	for i, a := range answers {
		want, code := "COMPLETED", ""
		if i >= ordinary {
			want, code = "FAILED", "output_unstorable"
		}
		got := ""
		if a.record.Error != nil {
			got = a.record.Error.Code
		}
		if a.status != http.StatusOK || a.record.Status != want || got != code {
			t.Fatalf("submit %d: %d %.300s, want %s %s within its wait", i, a.status, a.body, want, code)
		}
	}
	bal, err := s.core.env.Cmds.Billing.Balance(context.Background(), ws)
	if err != nil || bal.Total() != billing.FromWhole(100-ordinary) {
		t.Fatalf("balance %v (%v), want %d: each ordinary call charged once, the poisoned ones not at all", bal.Total(), err, 100-ordinary)
	}
}

func jsonInt(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
)

// BenchmarkEventsVsTrigger compares runs started per second by POST /v1/sdk/events with the
// trigger endpoint's, POST /v1/sdk/workflows/{id}, on one in-process service (no executor: the
// runs are started, not run), 16 senders at once (docs/performance.md, "Events"):
//
//	go test ./httpapi/ -run '^$' -bench BenchmarkEventsVsTrigger -benchtime 2000x
func BenchmarkEventsVsTrigger(b *testing.B) {
	s := newEventStackOn(b, nil)
	st, err := s.core.env.Cmds.Workflows.CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: s.ws,
		Definition: workflow.Definition{Name: "api", Components: []workflow.Component{{ID: "t", Module: workflow.ModuleTrigger},
			{ID: "echo", Module: "core.echo"}}, Edges: []workflow.Edge{{From: "t", To: "echo"}}}})
	if err != nil {
		b.Fatal(err)
	}
	s.listener(b, "one", `{"name": "one"}`)
	for i := range 3 {
		s.listener(b, fmt.Sprintf("three-%d", i), `{"name": "three", "filter": "amount > 10"}`)
	}
	s.listener(b, "debounced", `{"name": "gathered", "debounce": {"key": "customer", "quietMs": 60000, "maxItems": 1000}}`)
	var seq atomic.Int64
	cases := []eventBenchCase{
		{"trigger", "/v1/sdk/workflows/" + st.ID, 1, func() string { return `{"amount": 20}` }},
		{"event-1-listener", "/v1/sdk/events", 1, func() string {
			return fmt.Sprintf(`{"name": "one", "id": "e%d", "payload": {"amount": 20}}`, seq.Add(1))
		}},
		{"event-3-listeners", "/v1/sdk/events", 3, func() string {
			return fmt.Sprintf(`{"name": "three", "id": "e%d", "payload": {"amount": 20}}`, seq.Add(1))
		}},
		{"event-debounced", "/v1/sdk/events", 0, func() string {
			n := seq.Add(1)
			return fmt.Sprintf(`{"name": "gathered", "id": "e%d", "payload": {"customer": "c%d", "amount": 20}}`, n, n%100)
		}},
	}
	priv, err := apikeys.ParseSecret(s.key.APISecret)
	if err != nil {
		b.Fatal(err)
	}
	// Rounds alternate the cases, so each event figure has a trigger figure taken moments
	// before it on a shared machine.
	for round := range 3 {
		for _, c := range cases {
			benchEvents(b, fmt.Sprintf("%s/round-%d", c.name, round+1), s, priv, c, &seq)
		}
	}
}

// eventBenchCase is a request of BenchmarkEventsVsTrigger.
type eventBenchCase struct {
	name, path string
	runs       int // runs started per request
	body       func() string
}

// benchEvents sends c's signed POSTs from 16 senders and reports requests and runs started per
// second.
func benchEvents(b *testing.B, name string, s *eventStack, priv ed25519.PrivateKey, c eventBenchCase, seq *atomic.Int64) {
	{
		b.Run(name, func(b *testing.B) {
			b.SetParallelism(8) // 16 senders on 2 cores
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := c.body()
					target := c.path + "?nonce=" + strconv.FormatInt(seq.Add(1), 10)
					ts := strconv.FormatInt(time.Now().Unix(), 10)
					req, _ := http.NewRequest(http.MethodPost, s.srv.URL+target, strings.NewReader(body))
					req.Header.Set(httpapi.HeaderAPIKey, s.key.APIKey)
					req.Header.Set(httpapi.HeaderSDKTimestamp, ts)
					req.Header.Set(httpapi.HeaderSDKSignature, apikeys.Sign(priv, http.MethodPost, target, ts, []byte(body)))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("%s: %d", c.name, resp.StatusCode)
						return
					}
				}
			})
			secs := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/secs, "requests/s")
			b.ReportMetric(float64(b.N*c.runs)/secs, "runs/s")
		})
	}
}

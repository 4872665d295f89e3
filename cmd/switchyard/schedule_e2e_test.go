package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/switchyard/switchyard/testenv"
)

// The schedules of docs/workflows.md ("Schedules"), its worked example, through the built
// binary: listing with the next fires, pause and resume, firing by hand, a bad cron refused
// naming its field, and an every-second schedule firing on the service's own clock.
func TestSchedulesBlackBox(t *testing.T) {
	svc := startSDKService(t, 1000, "SWITCHYARD_RATE_LIMIT=1000", "SWITCHYARD_RATE_BURST=1000")
	c := svc.caller(t, svc.key)
	// The worked example of docs/workflows.md, as written there.
	wf := svc.createWorkflow(t, svc.key.WorkspaceID, docExample(t, "Weekday report"))
	id := wf["id"].(string)
	base := "/v1/sdk/workflows/" + id + "/schedules"

	list := func(t *testing.T) []map[string]any {
		t.Helper()
		r := c.do(http.MethodGet, base, nil)
		mustStatus(t, r, http.StatusOK, "GET schedules")
		var body struct {
			WorkflowID string           `json:"workflowId"`
			Schedules  []map[string]any `json:"schedules"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || body.WorkflowID != id {
			t.Fatalf("schedules answered %s (%v)", r.body, err)
		}
		return body.Schedules
	}

	t.Run("the list gives each schedule its next 10 fires, in its zone", func(t *testing.T) {
		s := list(t)
		if len(s) != 1 || s[0]["componentId"] != "weekdays" || s[0]["paused"] != false || s[0]["overlap"] != "queue_one" ||
			s[0]["timezone"] != "Europe/Berlin" || s[0]["catchUp"] != "2h" {
			t.Fatalf("schedules %v", s)
		}
		berlin, _ := time.LoadLocation("Europe/Berlin")
		fires := s[0]["nextFires"].([]any)
		if len(fires) != 10 {
			t.Fatalf("%d next fires, want 10", len(fires))
		}
		for _, f := range fires {
			at, err := time.Parse(time.RFC3339, f.(string))
			local := at.In(berlin)
			if err != nil || local.Hour() != 9 || local.Minute() != 0 || local.Weekday() == time.Saturday || local.Weekday() == time.Sunday {
				t.Fatalf("fire %v is not 09:00 on a weekday in Berlin (%v)", f, err)
			}
		}
	})
	t.Run("pause and resume are durable and shown", func(t *testing.T) {
		r := c.post(base+"/weekdays/pause", "")
		mustStatus(t, r, http.StatusOK, "pause")
		if r.json(t)["paused"] != true || list(t)[0]["paused"] != true {
			t.Fatalf("after pause: %s", r.body)
		}
		mustStatus(t, c.post(base+"/weekdays/pause", ""), http.StatusOK, "pause again")
		r = c.post(base+"/weekdays/resume", "{}")
		mustStatus(t, r, http.StatusOK, "resume")
		if r.json(t)["paused"] != false || list(t)[0]["paused"] != false {
			t.Fatalf("after resume: %s", r.body)
		}
	})
	t.Run("trigger starts one run now with the schedule's input", func(t *testing.T) {
		r := c.post(base+"/weekdays/trigger", "")
		mustStatus(t, r, http.StatusOK, "trigger")
		runID, _ := r.json(t)["runId"].(string)
		if runID == "" {
			t.Fatalf("trigger answered %s", r.body)
		}
		m := pollRun(t, c, runID, 30*time.Second, terminal)
		out, _ := json.Marshal(stageOf(t, m, "build")["output"])
		if m["status"] != "COMPLETED" || string(out) != `{"report":"daily"}` {
			t.Fatalf("triggered run %s, build output %s", m["status"], out)
		}
		if list(t)[0]["lastRunId"] != runID {
			t.Fatalf("the schedule's last run is not the triggered one")
		}
	})
	t.Run("unknown schedules and bad configs are refused by name", func(t *testing.T) {
		wantErrorBody(t, c.post(base+"/build/pause", ""), http.StatusNotFound, "schedule component build")
		wantErrorBody(t, c.post(base+"/weekdays/trigger", `{"x": 1}`), http.StatusBadRequest, "")
		r := c.post("/v1/sdk/workflows/"+id+"/components/weekdays", `{"config": {"cron": "0 9 * *"}}`)
		wantErrorBody(t, r, http.StatusBadRequest, "config.cron")
		r = c.post("/v1/sdk/workflows/"+id+"/components/weekdays", `{"config": {"overlap": "sometimes"}}`)
		wantErrorBody(t, r, http.StatusBadRequest, "config.overlap")
	})
	t.Run("an every-second schedule fires on its own", func(t *testing.T) {
		r := c.post("/v1/sdk/workflows/"+id+"/components/weekdays", `{"config": {"cron": null, "timezone": null, "jitterMs": null, "every": "1s"}}`)
		mustStatus(t, r, http.StatusOK, "switch to every 1s")
		before := list(t)[0]["lastRunId"]
		var runID string
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := list(t)[0]
			if last, _ := s["lastRunId"].(string); last != "" && last != before {
				runID = last
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no fire within 30s: %v", s)
			}
			time.Sleep(50 * time.Millisecond)
		}
		mustStatus(t, c.post(base+"/weekdays/pause", ""), http.StatusOK, "pause")
		// The fire is recorded before its run is started (docs/workflows.md): the run may not
		// be there yet.
		testenv.Eventually(t, 30*time.Second, "the fired run", func() bool {
			return c.do(http.MethodGet, "/v1/sdk/workflows/executions/"+runID, nil).status == http.StatusOK
		})
		m := pollRun(t, c, runID, 30*time.Second, terminal)
		if m["status"] != "COMPLETED" {
			t.Fatalf("fired run %v", m)
		}
	})
}

package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func mustSchedule(t *testing.T, config string) workflow.Schedule {
	t.Helper()
	s, err := workflow.ParseSchedule(json.RawMessage(config))
	if err != nil {
		t.Fatalf("ParseSchedule(%s): %v", config, err)
	}
	return s
}

// Spring-forward and fall-back in two zones: 2026-03-29 and 2026-10-25 in Europe/Berlin
// (at 01:00 UTC), 2026-03-08 and 2026-11-01 in America/New_York (07:00 and 06:00 UTC).
func TestScheduleFireTimesAcrossDST(t *testing.T) {
	cases := []struct {
		name, config, after string
		want                []string
	}{
		{"berlin skipped time fires at the gap's end", `{"cron": "30 2 * * *", "timezone": "Europe/Berlin"}`, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"berlin two skipped times fire once", `{"cron": "0,30 2 * * *", "timezone": "Europe/Berlin"}`, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:30:00Z"}},
		{"berlin repeated time fires once", `{"cron": "30 2 * * *", "timezone": "Europe/Berlin"}`, "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"berlin weekday mornings across the change", `{"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin"}`, "2026-03-26T12:00:00Z",
			[]string{"2026-03-27T08:00:00Z", "2026-03-30T07:00:00Z"}},
		{"new york skipped time fires at the gap's end", `{"cron": "30 2 * * *", "timezone": "America/New_York"}`, "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"new york repeated time fires once", `{"cron": "30 1 * * *", "timezone": "America/New_York"}`, "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"new york hourly skips the repeated hour", `{"cron": "0 * * * *", "timezone": "America/New_York"}`, "2026-11-01T03:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z"}},
		{"new york from inside the repeated hour", `{"cron": "30 1 * * *", "timezone": "America/New_York"}`, "2026-11-01T06:10:00Z",
			[]string{"2026-11-02T06:30:00Z"}},
		{"new york hourly over the gap", `{"cron": "0 * * * *", "timezone": "America/New_York"}`, "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		{"six fields, seconds first", `{"cron": "15 0 9 * * MON-FRI"}`, "2026-11-27T09:00:15Z",
			[]string{"2026-11-30T09:00:15Z"}},
		{"every 30s falls on the epoch's multiples", `{"every": "30s"}`, "2026-11-26T12:00:10Z",
			[]string{"2026-11-26T12:00:30Z", "2026-11-26T12:01:00Z"}},
		{"every from a fire time", `{"every": "1m"}`, "2026-11-26T12:00:00Z",
			[]string{"2026-11-26T12:01:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustSchedule(t, c.config).FireTimes(utc(c.after), len(c.want))
			var gs []string
			for _, g := range got {
				gs = append(gs, g.Format(time.RFC3339))
			}
			if strings.Join(gs, " ") != strings.Join(c.want, " ") {
				t.Fatalf("fires after %s:\n got %v\nwant %v", c.after, gs, c.want)
			}
		})
	}
}

func TestScheduleDueKeepsToTheWindow(t *testing.T) {
	s := mustSchedule(t, `{"every": "1m", "catchUp": "5m"}`)
	now := utc("2026-11-26T13:00:00Z")
	due := s.Due("k", utc("2026-11-26T12:00:00Z"), now, 100)
	if len(due) != 5 || !due[0].Equal(utc("2026-11-26T12:56:00Z")) || !due[4].Equal(now) {
		t.Fatalf("due within 5m of %s after an hour's stop: %v", now, due)
	}
	none := mustSchedule(t, `{"every": "1m"}`)
	if due := none.Due("k", utc("2026-11-26T12:00:00Z"), now.Add(5*time.Second), 100); len(due) != 1 || !due[0].Equal(now) {
		t.Fatalf("without catchUp only the fire late by less than the grace runs: %v", due)
	}
	if due := none.Due("k", now, now, 100); len(due) != 0 {
		t.Fatalf("a fire already decided is not due again: %v", due)
	}
}

func TestScheduleJitterIsStableAndBounded(t *testing.T) {
	s := mustSchedule(t, `{"every": "1m", "jitterMs": 5000}`)
	at := utc("2026-11-26T12:00:00Z")
	j := s.Jitter("wf.c", at)
	if j != s.Jitter("wf.c", at) || j < 0 || j >= 5*time.Second {
		t.Fatalf("jitter %v: must be stable and below 5s", j)
	}
	if due := s.Due("wf.c", at.Add(-time.Second), at.Add(j-time.Millisecond), 10); len(due) != 0 && j > 0 {
		t.Fatalf("a fire is not due before its jitter: %v", due)
	}
	if due := s.Due("wf.c", at.Add(-time.Second), at.Add(j), 10); len(due) != 1 {
		t.Fatalf("a fire is due once its jitter passed: %v", due)
	}
}

func TestScheduleConfigErrorsNameTheField(t *testing.T) {
	cases := []struct{ config, field string }{
		{`{}`, "config.cron"},
		{`{"cron": "0 9 * * MON-FRI", "every": "1m"}`, "config.every"},
		{`{"cron": "0 9 * *"}`, "config.cron"},
		{`{"cron": "0 9 * * FUNDAY"}`, "config.cron"},
		{`{"cron": "0 0 30 2 *"}`, "config.cron"},
		{`{"cron": "TZ=UTC 0 9 * * *"}`, "config.cron"},
		{`{"cron": "@every 1m"}`, "config.cron"},
		{`{"every": "500ms"}`, "config.every"},
		{`{"every": "soon"}`, "config.every"},
		{`{"every": "1m", "timezone": "Europe/Berlin"}`, "config.timezone"},
		{`{"cron": "0 9 * * *", "timezone": "Mars/Olympus"}`, "config.timezone"},
		{`{"cron": "0 9 * * *", "overlap": "sometimes"}`, "config.overlap"},
		{`{"cron": "0 9 * * *", "catchUp": "-1h"}`, "config.catchUp"},
		{`{"cron": "0 9 * * *", "catchUp": "1000h"}`, "config.catchUp"},
		{`{"cron": "0 9 * * *", "jitterMs": -1}`, "config.jitterMs"},
		{`{"cron": "0 9 * * *", "input": [1]}`, "config.input"},
		{`{"cron": "0 9 * * *", "extra": 1}`, "config"},
	}
	for _, c := range cases {
		_, err := workflow.ParseSchedule(json.RawMessage(c.config))
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: got %v, want an error naming %s", c.config, err, c.field)
		}
	}
	s := mustSchedule(t, `{"cron": "@daily", "overlap": "queue_one", "input": {"a": 1}}`)
	if s.Overlap() != workflow.OverlapQueueOne || string(s.Body()) != `{"a": 1}` {
		t.Fatalf("overlap %q body %s", s.Overlap(), s.Body())
	}
	if mustSchedule(t, `{"every": "1s"}`).Overlap() != workflow.OverlapSkip {
		t.Fatal("the default overlap is skip")
	}
}

func TestDefinitionWithScheduleNamesTheComponent(t *testing.T) {
	d := parse(t, `{"name": "w", "components": [{"id": "s", "module": "ON_SCHEDULE", "config": {"cron": "0 9 * * *"}},
		{"id": "bad", "module": "ON_SCHEDULE", "config": {"cron": "nope"}}]}`)
	err := d.Validate(checkModules)
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || !strings.HasPrefix(ve.Field, "components[1]") || !strings.HasSuffix(ve.Field, ".config.cron") {
		t.Fatalf("got %v, want components[1]...config.cron", err)
	}
}

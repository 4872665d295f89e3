package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The workflow page lists its schedules with their next fires; owners pause and resume them
// there, members see them without the buttons.
func TestWorkflowPageListsSchedules(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	owner := s.client(t, s.owner)
	wf := s.workflow(t, `{"name": "Weekday report", "components": [
		{"id": "weekdays", "name": "Weekdays", "module": "ON_SCHEDULE", "config": {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin"}, "position": [0, 0]},
		{"id": "build", "module": "core.echo", "position": [260, 0]}],
	  "edges": [{"from": "weekdays", "to": "build"}]}`).ID
	page := "/workspaces/" + s.ws + "/workflows/" + wf
	_, body := s.get(t, owner, page)
	if !strings.Contains(body, `data-schedule="weekdays"`) || !strings.Contains(body, `<code>0 9 * * MON-FRI</code> in Europe/Berlin`) ||
		strings.Count(body[strings.Index(body, `class="nowrap next-fires"`):], "<br>") < 5 || !strings.Contains(body, `class="pause-schedule"`) {
		t.Fatalf("the workflow page does not list the schedule with its next fires and a pause button\n%s", body)
	}
	if st, _ := s.post(t, owner, page+"/schedules/weekdays", url.Values{"action": {"pause"}}); st != http.StatusSeeOther {
		t.Fatalf("pause from the page: %d", st)
	}
	_, body = s.get(t, owner, page)
	if !strings.Contains(body, `<strong class="schedule-state">paused</strong>`) || !strings.Contains(body, `class="resume-schedule"`) {
		t.Fatalf("after the pause the page shows no paused schedule with a resume button\n%s", body)
	}
	member := s.client(t, s.member)
	if _, body := s.get(t, member, page); !strings.Contains(body, `data-schedule="weekdays"`) || strings.Contains(body, `class="resume-schedule"`) {
		t.Fatal("a member sees no schedule, or is offered the resume button")
	}
	if st, _ := s.post(t, member, page+"/schedules/weekdays", url.Values{"action": {"resume"}}); st != http.StatusForbidden {
		t.Fatalf("a member's resume: %d", st)
	}
	if st, _ := s.post(t, owner, page+"/schedules/weekdays", url.Values{"action": {"resume"}}); st != http.StatusSeeOther {
		t.Fatalf("resume from the page: %d", st)
	}
	if _, body := s.get(t, owner, page); !strings.Contains(body, `<span class="schedule-state">active</span>`) {
		t.Fatal("after the resume the schedule is not shown active")
	}
}

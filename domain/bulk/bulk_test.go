package bulk_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/bulk"
)

var now = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func fold(events []domain.Event) bulk.State {
	var s bulk.State
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

func TestCheckNamesTheField(t *testing.T) {
	later := now.Add(time.Hour)
	cases := []struct {
		name   string
		action bulk.Action
		filter bulk.Filter
		reason string
		field  string
	}{
		{"unknown action", "delete", bulk.Filter{}, "", "action"},
		{"unknown status", bulk.ActionCancel, bulk.Filter{Status: "DONE"}, "", "filter.status"},
		{"cancel of ended runs", bulk.ActionCancel, bulk.Filter{Status: "FAILED"}, "", "filter.status"},
		{"rerun of running runs", bulk.ActionRerun, bulk.Filter{Status: "EXECUTING"}, "", "filter.status"},
		{"after past before", bulk.ActionRerun, bulk.Filter{CreatedAfter: &later, CreatedBefore: &now}, "", "filter.createdAfter"},
		{"long reason", bulk.ActionCancel, bulk.Filter{}, strings.Repeat("x", bulk.MaxReasonLength+1), "reason"},
	}
	for _, c := range cases {
		err := bulk.Check(c.action, c.filter, c.reason)
		var v *domain.ValidationError
		if !errors.As(err, &v) || v.Field != c.field {
			t.Errorf("%s: got %v, want a validation error of %s", c.name, err, c.field)
		}
	}
	if err := bulk.Check(bulk.ActionRerun, bulk.Filter{Status: "COMPLETED", CreatedAfter: &now, CreatedBefore: &later}, "why"); err != nil {
		t.Errorf("a valid bulk: %v", err)
	}
}

func TestDefaultStatuses(t *testing.T) {
	if got := (bulk.Filter{}).Statuses(bulk.ActionCancel); strings.Join(got, ",") != "CREATED,EXECUTING" {
		t.Errorf("cancel: %v", got)
	}
	if got := (bulk.Filter{}).Statuses(bulk.ActionRerun); strings.Join(got, ",") != "FAILED" {
		t.Errorf("rerun: %v", got)
	}
}

func TestProgressMarksEachRunOnceInOrder(t *testing.T) {
	req := bulk.Request{BulkID: "b1", WorkspaceID: "ws", WorkflowID: "wf", Action: bulk.ActionCancel, RunIDs: []string{"r1", "r2", "r3"}}
	events, err := bulk.DecideRequest(bulk.State{}, req, now)
	if err != nil {
		t.Fatal(err)
	}
	s := fold(events)
	if s.Status != bulk.StatusCreated || s.Detail().Matched != 3 {
		t.Fatalf("requested: %+v", s.Detail())
	}
	if _, err := bulk.DecideRequest(s, req, now); !errors.Is(err, domain.ErrAlreadyExists) {
		t.Errorf("a second request: %v", err)
	}
	if _, err := bulk.DecideProgress(s, []bulk.Result{{RunID: "r2"}}, now); !errors.Is(err, domain.ErrConflict) {
		t.Errorf("marking out of order: %v", err)
	}
	more, err := bulk.DecideProgress(s, []bulk.Result{{RunID: "r1"}, {RunID: "r2", Error: "already finished"}}, now)
	if err != nil || len(more) != 1 {
		t.Fatalf("first batch: %v %v", more, err)
	}
	s = fold(append(events, more...))
	if got := s.Next(10); len(got) != 1 || got[0] != "r3" || s.Status != bulk.StatusRunning {
		t.Fatalf("next after the first batch: %v %s", got, s.Status)
	}
	if _, err := bulk.DecideProgress(s, []bulk.Result{{RunID: "r1"}}, now); !errors.Is(err, domain.ErrConflict) {
		t.Errorf("marking a run again: %v", err)
	}
	last, err := bulk.DecideProgress(s, []bulk.Result{{RunID: "r3"}}, now)
	if err != nil || len(last) != 2 {
		t.Fatalf("last batch: %v %v", last, err)
	}
	d := fold(append(append(events, more...), last...)).Detail()
	if d.Status != bulk.StatusCompleted || d.Done != 2 || d.Failed != 1 || len(d.Failures) != 1 || d.CompletedAt == nil {
		t.Errorf("completed: %+v", d)
	}
}

func TestBulkOfNoRunCompletesAtOnce(t *testing.T) {
	events, err := bulk.DecideRequest(bulk.State{}, bulk.Request{BulkID: "b", Action: bulk.ActionRerun}, now)
	if err != nil {
		t.Fatal(err)
	}
	if d := fold(events).Detail(); d.Status != bulk.StatusCompleted || d.Matched != 0 {
		t.Errorf("%+v", d)
	}
}

func TestTooManyRunsIsRefused(t *testing.T) {
	ids := make([]string, bulk.MaxRuns+1)
	_, err := bulk.DecideRequest(bulk.State{}, bulk.Request{BulkID: "b", Action: bulk.ActionCancel, RunIDs: ids}, now)
	var v *domain.ValidationError
	if !errors.As(err, &v) || v.Field != "filter" {
		t.Errorf("got %v", err)
	}
}

func TestRerunIDIsDerived(t *testing.T) {
	first, again := bulk.RerunID("b", "r"), bulk.RerunID("b", "r")
	if first != again || first == bulk.RerunID("b2", "r") || first == bulk.RerunID("b", "r2") {
		t.Error("RerunID must be a function of the bulk and the run")
	}
}

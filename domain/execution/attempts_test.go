package execution_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
)

func TestAttemptsFromHistory(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 2, 3, 4, s, 0, time.UTC) }
	fail := json.RawMessage(`{"code":"boom","message":"it broke"}`)
	history := []domain.Event{
		execution.Submitted{ExecutionID: "e", At: at(0)},
		execution.Started{ExecutionID: "e", Attempt: 1, At: at(1)},
		execution.AttemptFailed{ExecutionID: "e", Attempt: 1, Error: fail, RetryAt: at(5), At: at(2)},
		execution.Started{ExecutionID: "e", Attempt: 2, At: at(6)},
		execution.Started{ExecutionID: "e", Attempt: 2, At: at(20)}, // the first lease ran out
		execution.Completed{ExecutionID: "e", Attempt: 2, At: at(21)},
	}
	got := execution.Attempts(history)
	want := []execution.Attempt{
		{Attempt: 1, StartedAt: at(1), EndedAt: at(2), Outcome: execution.OutcomeRetried, Error: fail, RetryAt: at(5), Claims: 1},
		{Attempt: 2, StartedAt: at(6), EndedAt: at(21), Outcome: execution.OutcomeCompleted, Claims: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("attempts\n got %+v\nwant %+v", got, want)
	}
	// A call run before its claim was written completes from CREATED; a final failure ends it.
	first := execution.Attempts([]domain.Event{execution.Submitted{At: at(0)}, execution.Completed{Attempt: 1, At: at(1)}})
	if len(first) != 1 || first[0].StartedAt != at(0) || first[0].Outcome != execution.OutcomeCompleted {
		t.Fatalf("run first: %+v", first)
	}
	failed := execution.Attempts([]domain.Event{execution.Submitted{At: at(0)}, execution.Started{Attempt: 1, At: at(1)}, execution.Failed{Attempt: 1, Error: fail, At: at(3)}})
	if len(failed) != 1 || failed[0].Outcome != execution.OutcomeFailed || string(failed[0].Error) != string(fail) {
		t.Fatalf("failed: %+v", failed)
	}
	if running := execution.Attempts([]domain.Event{execution.Submitted{At: at(0)}, execution.Started{Attempt: 1, At: at(1)}}); len(running) != 1 || running[0].Outcome != execution.OutcomeRunning {
		t.Fatalf("running: %+v", running)
	}
}

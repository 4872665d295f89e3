package webhooks

import (
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// TestNoCallbackTrustsOnlyWhatTheEventSays: only a terminal event that says so lets the
// dispatcher skip an execution unread; one recorded before the field existed does not.
func TestNoCallbackTrustsOnlyWhatTheEventSays(t *testing.T) {
	tests := []struct {
		name string
		ev   domain.Event
		raw  string
		want bool
	}{
		{name: "completed, no callback", ev: execution.Completed{ExecutionID: "e", NoCallback: true}, want: true},
		{name: "failed, no callback", ev: execution.Failed{ExecutionID: "e", NoCallback: true}, want: true},
		{name: "completed with a callback", ev: execution.Completed{ExecutionID: "e"}},
		{name: "failed with a callback", ev: execution.Failed{ExecutionID: "e"}},
		{name: "completed before the field", ev: execution.Completed{}, raw: `{"executionId":"e","attempt":1,"output":{}}`},
		{name: "replay", ev: execution.WebhookReplayRequested{ExecutionID: "e"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.raw == "" {
				var err error
				if data, err = domain.Encode(tc.ev); err != nil {
					t.Fatal(err)
				}
			}
			ev := eventstore.RecordedEvent{Stream: "execution-e", Type: tc.ev.EventType(), Data: data}
			if got := noCallback(ev); got != tc.want {
				t.Errorf("noCallback = %v, want %v", got, tc.want)
			}
		})
	}
}

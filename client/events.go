package client

import (
	"context"
	crand "crypto/rand"
	"net/http"
)

// Event is an event for the workflows listening for it (docs/workflows.md, "Events").
type Event struct {
	// Name is the event's name, as ON_EVENT triggers' config.name gives it.
	Name string `json:"name"`
	// Payload is the started runs' trigger body: a JSON object (nil sends {}).
	Payload any `json:"payload,omitempty"`
	// ID is your id of the event: sent again within 24 hours, it starts nothing and answers
	// the first sending's runs. Empty: SendEvent makes one up, so that its own retries of the
	// same call are one event.
	ID string `json:"id,omitempty"`
}

// EventRun is a run an event started, or for a debounced trigger the run that will carry it.
type EventRun struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	// Debounced is true when the run starts once the trigger's debounce window flushes.
	Debounced bool `json:"debounced,omitempty"`
}

// SentEvent is what an event started.
type SentEvent struct {
	EventID string     `json:"eventId"`
	Runs    []EventRun `json:"runs"`
	// Duplicate is true when the id was seen within 24 hours: Runs are the first's.
	Duplicate bool `json:"duplicate,omitempty"`
}

// SendEvent sends e to POST /v1/sdk/events: a run of every workflow of the workspace whose
// ON_EVENT trigger has its name and whose filter holds for its payload.
func (c *Client) SendEvent(ctx context.Context, e Event) (*SentEvent, error) {
	if e.ID == "" {
		e.ID = crand.Text()
	}
	var out SentEvent
	if err := c.do(ctx, http.MethodPost, "/v1/sdk/events", e, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

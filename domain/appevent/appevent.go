// Package appevent is an event a workspace's own systems send to POST /v1/sdk/events
// (docs/workflows.md, "Events"): it starts a run of every workflow whose ON_EVENT trigger has
// its name and whose filter holds for its payload.
//
// Each event id of a workspace has a stream, appevent-<hash of workspace and id>. Received
// fixes what the event matched when it arrived, so an event whose runs were interrupted by a
// crash is delivered to the same triggers when sent again, finding the runs it started under
// their derived ids; Delivered records, for an event that reached a debounced trigger, the
// runs it started or that will carry it (which window took it cannot be derived). An id sent
// again within DedupWindow of its last reception is not processed twice: the answer is the
// first's.
package appevent

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category: appevent-<hash>.
const Category = "appevent"

// DedupWindow is how long an event id is remembered.
const DedupWindow = 24 * time.Hour

// MaxIDLength bounds the caller's event id.
const MaxIDLength = 255

// eventIDSpace is the namespace of the ids the service gives each reception.
var eventIDSpace = uuid.MustParse("8a3e2f43-41a5-4c7e-9b1e-2f6c3a0d5e77")

// Match is a trigger component an event reached.
type Match struct {
	WorkflowID  string `json:"workflowId"`
	ComponentID string `json:"componentId"`
}

// Run is a run an event started, or for a debounced trigger the run that will carry it.
type Run struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	// Debounced is true when the run starts once the trigger's debounce flushes.
	Debounced bool `json:"debounced,omitempty"`
}

// Received is an event's arrival with what it matched.
type Received struct {
	EventID     string          `json:"eventId"`
	WorkspaceID string          `json:"workspaceId"`
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Payload     json.RawMessage `json:"payload"`
	Matches     []Match         `json:"matches"`
	APIKeyID    string          `json:"apiKeyId,omitempty"`
	At          time.Time       `json:"at"`
}

// Delivered records the runs a reception started.
type Delivered struct {
	EventID string    `json:"eventId"`
	Runs    []Run     `json:"runs"`
	At      time.Time `json:"at"`
}

// EventType implements domain.Event.
func (Received) EventType() string { return "EventReceived" }

// EventType implements domain.Event.
func (Delivered) EventType() string { return "EventDelivered" }

// IdempotencyKey implements domain.Identified: a Delivered appended twice is one.
func (e Delivered) IdempotencyKey() string { return "appevent-delivered/" + e.EventID }

func init() { domain.Events.Register(Received{}, Delivered{}) }

// State is an event id's last reception.
type State struct {
	Exists bool
	// Receptions counts the receptions of the id.
	Receptions int
	Last       Received
	// Runs is the last reception's runs, once Delivered.
	Runs      []Run
	Delivered bool
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch e := e.(type) {
	case Received:
		s.Exists = true
		s.Receptions++
		s.Last, s.Runs, s.Delivered = e, nil, false
	case Delivered:
		if e.EventID == s.Last.EventID {
			s.Runs, s.Delivered = e.Runs, true
		}
	}
	return s
}

// Seen reports whether the id was received within DedupWindow before now.
func (s State) Seen(now time.Time) bool {
	return s.Exists && now.Before(s.Last.At.Add(DedupWindow))
}

// DecideReceive records r unless its id was seen within DedupWindow (then nothing: the caller
// answers the last reception). r.EventID is given here, derived from the stream and the
// reception's number, so the same reception always has the same id.
func DecideReceive(s State, stream string, r Received, now time.Time) ([]domain.Event, error) {
	if s.Seen(now) {
		return nil, nil
	}
	r.EventID = uuid.NewSHA1(eventIDSpace, []byte(stream+"/"+strconv.Itoa(s.Receptions))).String()
	r.At = now
	if r.Matches == nil {
		r.Matches = []Match{}
	}
	return []domain.Event{r}, nil
}

// DecideDelivered records the runs of the last reception, once.
func DecideDelivered(s State, eventID string, runs []Run, now time.Time) ([]domain.Event, error) {
	if !s.Exists || s.Last.EventID != eventID || s.Delivered {
		return nil, nil
	}
	if runs == nil {
		runs = []Run{}
	}
	return []domain.Event{Delivered{EventID: eventID, Runs: runs, At: now}}, nil
}

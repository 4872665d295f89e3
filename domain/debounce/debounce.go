// Package debounce is one window of a debounced trigger (docs/workflows.md, "Debounce"): the
// deliveries of one key of an ON_EVENT or ON_WEBHOOK component gathered into one run.
//
// A window lives on a stream of its own, debounce-<hash of workflow, component and key>-<n>:
// Buffered events hold each delivery's payload in arrival order; Flushed closes the window
// (the expected revision of its append makes it close on exactly the deliveries it read, so
// a delivery racing the flush lands either in the window or in the next one, never nowhere);
// Started records that its run was started (with the id derived from the window, so a start
// repeated after a crash or by a second instance is the same run). A delivery that finds the
// window closed goes on to window n+1.
package debounce

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Category is the stream category: debounce-<key hash>-<window>.
const Category = "debounce"

// ErrClosed is a delivery to a window already flushed: it goes to the next one.
var ErrClosed = errors.New("debounce window closed")

// ErrFull is a delivery to a window that holds its maxItems, or would pass
// workflow.MaxDebounceBytes with it: the window is flushed and the delivery goes to the next.
var ErrFull = errors.New("debounce window full")

// Why a window was flushed.
const (
	ReasonQuiet    = "quiet"
	ReasonMaxWait  = "maxWait"
	ReasonMaxItems = "maxItems"
	ReasonSize     = "size"
)

// Window names a window: the trigger component, the key and the window's number.
type Window struct {
	WorkspaceID string `json:"workspaceId"`
	WorkflowID  string `json:"workflowId"`
	ComponentID string `json:"componentId"`
	// Key is the key's value as JSON text.
	Key string `json:"key"`
	// N counts the key's windows from 0.
	N int `json:"n"`
}

// Buffered is one delivery gathered into a window.
type Buffered struct {
	Window
	DeliveryID string          `json:"deliveryId"`
	Payload    json.RawMessage `json:"payload"`
	// Config is the debounce as the window's first delivery found it: the window keeps it,
	// so its due time does not move with an edit of the workflow.
	Config *workflow.DebounceConfig `json:"config,omitempty"`
	At     time.Time                `json:"at"`
}

// Flushed closes a window on the deliveries it holds; its run starts next.
type Flushed struct {
	RunID  string    `json:"runId"`
	Count  int       `json:"count"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Started records that a flushed window's run was started, or why it could not be.
type Started struct {
	RunID string    `json:"runId"`
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// EventType implements domain.Event.
func (Buffered) EventType() string { return "DebounceBuffered" }

// EventType implements domain.Event.
func (Flushed) EventType() string { return "DebounceFlushed" }

// EventType implements domain.Event.
func (Started) EventType() string { return "DebounceStarted" }

func init() { domain.Events.Register(Buffered{}, Flushed{}, Started{}) }

// State is a window.
type State struct {
	Exists bool
	Window
	Config  workflow.DebounceConfig
	Items   []Item
	Bytes   int
	FirstAt time.Time
	LastAt  time.Time
	Flushed bool
	Reason  string
	RunID   string
	Started bool
}

// Item is one delivery of a window.
type Item struct {
	DeliveryID string
	Payload    json.RawMessage
}

// Evolve applies one event; it appends to Items, so a state shared with a cache is cloned
// first (Clone).
func (s State) Evolve(e domain.Event) State {
	switch e := e.(type) {
	case Buffered:
		if !s.Exists {
			s.Exists, s.Window, s.FirstAt = true, e.Window, e.At
			if e.Config != nil {
				s.Config = *e.Config
			}
		}
		s.Items = append(s.Items, Item{DeliveryID: e.DeliveryID, Payload: e.Payload})
		s.Bytes += len(e.Payload)
		s.LastAt = e.At
	case Flushed:
		s.Flushed, s.RunID, s.Reason = true, e.RunID, e.Reason
	case Started:
		s.Started = true
	}
	return s
}

// Clone copies the state's items, so evolving the copy leaves s as it is.
func (s State) Clone() State {
	s.Items = append([]Item(nil), s.Items...)
	return s
}

// Holds reports whether the window holds delivery id.
func (s State) Holds(id string) bool {
	for _, it := range s.Items {
		if it.DeliveryID == id {
			return true
		}
	}
	return false
}

// Due is when the window's run should start: once the key has been quiet for quietMs, or
// maxWaitMs after the first delivery, at once when it holds maxItems. Zero for a window
// flushed or empty.
func (s State) Due() (time.Time, string) {
	if !s.Exists || s.Flushed {
		return time.Time{}, ""
	}
	if len(s.Items) >= s.Config.MaxItems {
		return s.LastAt, ReasonMaxItems
	}
	quiet := s.LastAt.Add(time.Duration(s.Config.QuietMs) * time.Millisecond)
	maxWait := s.FirstAt.Add(time.Duration(s.Config.MaxWaitMs) * time.Millisecond)
	if maxWait.Before(quiet) {
		return maxWait, ReasonMaxWait
	}
	return quiet, ReasonQuiet
}

// Body is the trigger body of the window's run: {"events": [every payload, in arrival order]}.
func (s State) Body() json.RawMessage {
	events := make([]json.RawMessage, len(s.Items))
	for i, it := range s.Items {
		events[i] = it.Payload
	}
	b, _ := json.Marshal(map[string][]json.RawMessage{"events": events}) // raw JSON already checked: cannot fail
	return b
}

// DecideBuffer gathers b into the window. A delivery the window holds already is nothing new;
// a closed window is ErrClosed and a full one ErrFull (the caller flushes it), both sending the
// delivery on to the next window. cfg is the trigger's debounce now, kept by a new window.
func DecideBuffer(s State, b Buffered, cfg workflow.DebounceConfig, now time.Time) ([]domain.Event, error) {
	switch {
	case s.Holds(b.DeliveryID):
		return nil, nil
	case s.Flushed:
		return nil, ErrClosed
	case s.Exists && (len(s.Items) >= s.Config.MaxItems || s.Bytes+len(b.Payload) > workflow.MaxDebounceBytes):
		return nil, ErrFull
	}
	b.At = now
	if !s.Exists {
		b.Config = &cfg
	}
	return []domain.Event{b}, nil
}

// DecideFlush closes the window for its run runID once it is due at now, or at once with
// force (a full window). A window flushed already, or empty, is nothing new.
func DecideFlush(s State, runID string, now time.Time, force bool) ([]domain.Event, error) {
	due, reason := s.Due()
	switch {
	case due.IsZero():
		return nil, nil
	case force && now.Before(due):
		reason = ReasonSize
		if len(s.Items) >= s.Config.MaxItems {
			reason = ReasonMaxItems
		}
	case now.Before(due):
		return nil, nil
	}
	return []domain.Event{Flushed{RunID: runID, Count: len(s.Items), Reason: reason, At: now}}, nil
}

// DecideStarted records the start of a flushed window's run (startErr "" when it started), once.
func DecideStarted(s State, startErr string, now time.Time) ([]domain.Event, error) {
	if !s.Flushed || s.Started {
		return nil, nil
	}
	return []domain.Event{Started{RunID: s.RunID, Error: startErr, At: now}}, nil
}

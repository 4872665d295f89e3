package workflow

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of workflows: workflow-<id>.
const Category = "workflow"

// NameCategory streams reserve a workflow name in a workspace: workflowname-<hash>.
const NameCategory = "workflowname"

// ErrDeleted means the workflow was deleted; callers answer 404.
var ErrDeleted = errors.New("workflow deleted")

// Created records a new workflow.
type Created struct {
	WorkflowID  string     `json:"workflowId"`
	WorkspaceID string     `json:"workspaceId"`
	Definition  Definition `json:"definition"`
	At          time.Time  `json:"at"`
}

// EventType names the event in the log.
func (Created) EventType() string { return "WorkflowCreated" }

// Updated records a whole new definition (PUT).
type Updated struct {
	WorkflowID string     `json:"workflowId"`
	Definition Definition `json:"definition"`
	At         time.Time  `json:"at"`
}

// EventType names the event in the log.
func (Updated) EventType() string { return "WorkflowUpdated" }

// ComponentUpdated records a component's new name, position and (merged) config (SPEC.md 4.8).
type ComponentUpdated struct {
	WorkflowID  string          `json:"workflowId"`
	ComponentID string          `json:"componentId"`
	Name        string          `json:"name"`
	Position    Position        `json:"position"`
	Config      json.RawMessage `json:"config"`
	At          time.Time       `json:"at"`
}

// EventType names the event in the log.
func (ComponentUpdated) EventType() string { return "WorkflowComponentUpdated" }

// Deleted records a deletion; runs already started carry on with their copy.
type Deleted struct {
	WorkflowID string    `json:"workflowId"`
	At         time.Time `json:"at"`
}

// EventType names the event in the log.
func (Deleted) EventType() string { return "WorkflowDeleted" }

// NameReserved claims a name in a workspace for a workflow.
type NameReserved struct {
	WorkspaceID string    `json:"workspaceId"`
	Name        string    `json:"name"`
	WorkflowID  string    `json:"workflowId"`
	At          time.Time `json:"at"`
}

// EventType names the event in the log.
func (NameReserved) EventType() string { return "WorkflowNameReserved" }

func init() {
	domain.Events.Register(Created{}, Updated{}, ComponentUpdated{}, Deleted{}, NameReserved{})
}

// State is a workflow folded from its stream.
type State struct {
	Exists      bool
	Deleted     bool
	ID          string
	WorkspaceID string
	Definition  Definition
	// Version counts the changes: 1 after creation.
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	switch ev := e.(type) {
	case Created:
		s = State{Exists: true, ID: ev.WorkflowID, WorkspaceID: ev.WorkspaceID, Definition: stamp(ev.Definition, ev.At), CreatedAt: ev.At}
		s.UpdatedAt = ev.At
	case Updated:
		s.Definition, s.UpdatedAt = stamp(ev.Definition, ev.At), ev.At
	case ComponentUpdated:
		s.Definition = s.Definition.clone()
		for i, c := range s.Definition.Components {
			if c.ID == ev.ComponentID {
				c.Name, c.Position, c.Config, c.UpdatedAt = ev.Name, ev.Position, ev.Config, ev.At
				s.Definition.Components[i] = c
			}
		}
		s.UpdatedAt = ev.At
	case Deleted:
		s.Deleted, s.UpdatedAt = true, ev.At
	default:
		return s
	}
	s.Version++
	return s
}

// stamp gives components with no update time of their own the time of the definition.
func stamp(d Definition, at time.Time) Definition {
	d = d.clone()
	for i := range d.Components {
		if d.Components[i].UpdatedAt.IsZero() {
			d.Components[i].UpdatedAt = at
		}
	}
	return d
}

func (d Definition) clone() Definition {
	d.Components = append([]Component(nil), d.Components...)
	d.Edges = append([]Edge(nil), d.Edges...)
	return d
}

// Live reports whether the workflow exists and was not deleted.
func (s State) Live() bool { return s.Exists && !s.Deleted }

// Component finds a component by id.
func (s State) Component(id string) (Component, bool) {
	for _, c := range s.Definition.Components {
		if c.ID == id {
			return c, true
		}
	}
	return Component{}, false
}

// NormalizeName is how names compare for uniqueness: trimmed, case-insensitive.
func NormalizeName(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// DecideCreate accepts a validated definition as a new workflow.
func DecideCreate(s State, id, workspaceID string, d Definition, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	return []domain.Event{Created{WorkflowID: id, WorkspaceID: workspaceID, Definition: clearStamps(d), At: now.UTC()}}, nil
}

// DecideUpdate replaces the definition of a live workflow.
func DecideUpdate(s State, d Definition, now time.Time) ([]domain.Event, error) {
	if err := s.mustLive(); err != nil {
		return nil, err
	}
	return []domain.Event{Updated{WorkflowID: s.ID, Definition: clearStamps(d), At: now.UTC()}}, nil
}

// clearStamps drops client-sent update times: Evolve stamps components with the event's.
func clearStamps(d Definition) Definition {
	d = d.clone()
	for i := range d.Components {
		d.Components[i].UpdatedAt = time.Time{}
	}
	return d
}

// ComponentPatch is a partial component update (SPEC.md 4.8); nil fields stay as they are.
type ComponentPatch struct {
	Config   json.RawMessage
	Name     *string
	Position *Position
}

// DecideUpdateComponent applies a patch to one component; check validates the merged config
// of a module component.
func DecideUpdateComponent(s State, componentID string, p ComponentPatch, check ModuleCheck, now time.Time) ([]domain.Event, error) {
	if err := s.mustLive(); err != nil {
		return nil, err
	}
	c, ok := s.Component(componentID)
	if !ok {
		return nil, domain.ErrNotFound
	}
	ev := ComponentUpdated{WorkflowID: s.ID, ComponentID: c.ID, Name: c.Name, Position: c.Position, Config: c.Config, At: now.UTC()}
	if p.Name != nil {
		name := strings.TrimSpace(*p.Name)
		if name == "" || len(name) > MaxNameLength {
			return nil, domain.Invalid("name", "must be 1 to %d characters", MaxNameLength)
		}
		if err := domain.CheckStorableString("name", name); err != nil {
			return nil, err
		}
		ev.Name = name
	}
	if p.Position != nil {
		if err := ValidPosition(*p.Position); err != nil {
			return nil, domain.Invalid("position", "%s", err)
		}
		ev.Position = *p.Position
	}
	if p.Config != nil {
		if err := domain.CheckStorableJSON("config", p.Config); err != nil {
			return nil, err
		}
		merged, err := MergeConfig(c.Config, p.Config)
		if err != nil {
			return nil, domain.Invalid("config", "must be a JSON object")
		}
		c.Config = merged
		if err := checkConfig(c, check); err != nil {
			return nil, err
		}
		ev.Config = merged
	}
	return []domain.Event{ev}, nil
}

// DecideDelete deletes a live workflow.
func DecideDelete(s State, now time.Time) ([]domain.Event, error) {
	if err := s.mustLive(); err != nil {
		return nil, err
	}
	return []domain.Event{Deleted{WorkflowID: s.ID, At: now.UTC()}}, nil
}

func (s State) mustLive() error {
	if !s.Exists {
		return domain.ErrNotFound
	}
	if s.Deleted {
		return ErrDeleted
	}
	return nil
}

// Reservation is a name reservation stream's state: which workflow last claimed the name, when.
type Reservation struct {
	WorkflowID string
	At         time.Time
}

// Evolve applies one event.
func (r Reservation) Evolve(e domain.Event) Reservation {
	if ev, ok := e.(NameReserved); ok {
		r.WorkflowID, r.At = ev.WorkflowID, ev.At
	}
	return r
}

// PendingCreate is how long a reservation whose workflow does not exist yet still holds the
// name: the create that made it is under way (or died, and the name comes free after this).
const PendingCreate = time.Minute

// DecideReserve claims name for workflowID. holder is the state of the workflow holding the
// reservation now: the name is taken while that workflow is live and still called so (a
// deletion or rename frees it without writing to this stream), or while its create is pending.
func DecideReserve(r Reservation, holder State, workspaceID, name, workflowID string, now time.Time) ([]domain.Event, error) {
	if r.WorkflowID == workflowID {
		return nil, nil
	}
	if r.WorkflowID != "" && holder.Live() && NormalizeName(holder.Definition.Name) == NormalizeName(name) {
		return nil, domain.ErrConflict
	}
	if r.WorkflowID != "" && !holder.Exists && now.Sub(r.At) < PendingCreate {
		return nil, domain.ErrConflict
	}
	return []domain.Event{NameReserved{WorkspaceID: workspaceID, Name: name, WorkflowID: workflowID, At: now.UTC()}}, nil
}

// View is a workflow as the workspace endpoints and the CLI show it.
type View struct {
	ID          string       `json:"id"`
	WorkspaceID string       `json:"workspaceId"`
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Components  []Component  `json:"components"`
	Edges       []Edge       `json:"edges"`
	TimeoutMs   int64        `json:"timeoutMs,omitempty"`
	Notify      *NotifyView  `json:"notify,omitempty"`
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Version     int          `json:"version"`
	CreatedAt   time.Time    `json:"createdAt"`
	UpdatedAt   time.Time    `json:"updatedAt"`
}

// View renders the workflow. A workflow of one component has no edges: [] rather than null, as
// the document says.
func (s State) View() View {
	edges := s.Definition.Edges
	if edges == nil {
		edges = []Edge{}
	}
	return View{ID: s.ID, WorkspaceID: s.WorkspaceID, Name: s.Definition.Name, Description: s.Definition.Description,
		Components: s.Definition.Components, Edges: edges, TimeoutMs: s.Definition.TimeoutMs, Notify: s.Definition.Notify.View(), Concurrency: s.Definition.Concurrency, Version: s.Version, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

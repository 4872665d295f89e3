package run

import (
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Reuse is a stage a re-run copies from the run it re-runs: recorded in the re-run's own
// Triggered, so that its folds never read the original run, which may change or go away.
type Reuse struct {
	ComponentID string          `json:"componentId"`
	Output      json.RawMessage `json:"output"`
	Skipped     bool            `json:"skipped,omitempty"`
	Conditions  map[string]bool `json:"conditions,omitempty"`
}

// Rerun is what a re-run asks for: FromStage restarts at that component and everything
// downstream of it; without it, Input (when set) runs the whole run again, and neither
// restarts at the stages that did not complete.
type Rerun struct {
	FromStage string
	Input     json.RawMessage
}

// DecideRerun starts run newRunID of the definition orig ran, reusing the stages of orig that
// completed upstream of the restart point (reusable). orig must have ended.
func DecideRerun(orig State, newRunID, apiKeyID string, r Rerun, when Condition, now time.Time) ([]domain.Event, error) {
	if !orig.Exists {
		return nil, domain.ErrNotFound
	}
	if r.FromStage != "" && !orig.scope[r.FromStage] {
		return nil, domain.Invalid("fromStage", "%q is not a component reached from the run's trigger", r.FromStage)
	}
	if !orig.Status.Terminal() {
		return nil, domain.Conflict("run %s has not ended (%s); only an ended run can be re-run", orig.ID, orig.Status)
	}
	input := orig.Input
	if len(r.Input) > 0 {
		input = r.Input
	}
	ev := Triggered{RunID: newRunID, WorkflowID: orig.WorkflowID, WorkspaceID: orig.WorkspaceID, APIKeyID: apiKeyID,
		TriggerID: orig.TriggerID, Definition: orig.Definition, Input: input, RerunOf: orig.ID,
		Conditions: conditions(orig.graph.Out[orig.TriggerID], input, input, when), At: now.UTC()}
	if r.FromStage != "" || len(r.Input) == 0 {
		ev.Reused = orig.reusable(orig.restart(r.FromStage))
	}
	return []domain.Event{ev}, nil
}

// restart is the components a re-run runs again: from and what is downstream of it, or,
// without from, every stage that did not complete and what is downstream of those. A
// FOR_EACH and its body always run again, with what is downstream of them: a re-run copies
// top-level stages only.
func (s *State) restart(from string) map[string]bool {
	var roots []string
	if from != "" {
		roots = append(roots, from)
	}
	for _, id := range s.graph.Order {
		if !s.scope[id] || id == s.TriggerID {
			continue
		}
		st, ok := s.stageAt(id, NoIteration)
		loop := s.body[id] != "" || s.graph.Components[id].Module == workflow.ModuleForEach
		if loop || (from == "" && (!ok || st.Status != StageStatusCompleted)) {
			roots = append(roots, id)
		}
	}
	out := map[string]bool{}
	for _, id := range roots {
		for c := range s.graph.Reachable(id) {
			out[c] = true
		}
	}
	return out
}

// reusable lists the completed top-level stages outside restart, in the definition's order.
func (s *State) reusable(restart map[string]bool) []Reuse {
	var out []Reuse
	for _, id := range s.graph.Order {
		if !s.scope[id] || id == s.TriggerID || restart[id] {
			continue
		}
		if st, ok := s.stageAt(id, NoIteration); ok && st.Status == StageStatusCompleted {
			out = append(out, Reuse{ComponentID: id, Output: st.Output, Skipped: st.Skipped, Conditions: st.Conditions})
		}
	}
	return out
}

// reuse completes the stages a re-run copies at its start: no execution, no usage.
func (s *State) reuse(rs []Reuse, at time.Time) {
	for _, r := range rs {
		if _, ok := s.graph.Components[r.ComponentID]; !ok {
			continue
		}
		id := StageID(s.ID, r.ComponentID, NoIteration)
		s.dispatch(Dispatch{StageID: id, ComponentID: r.ComponentID, Iteration: NoIteration, Skipped: r.Skipped}, at)
		s.Stages[s.byID[id]].Reused = true
		out := r.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		s.complete(StageCompleted{StageID: id, Output: out, Conditions: r.Conditions, At: at})
	}
}

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
	ComponentID string `json:"componentId"`
	// Loop is the FOR_EACH component whose body holds the stage, and Iteration its iteration;
	// Loop is empty (Iteration NoIteration) for a top-level stage. A body stage is created
	// when its FOR_EACH is dispatched in the re-run.
	Loop       string          `json:"loop,omitempty"`
	Iteration  int             `json:"iteration"`
	Output     json.RawMessage `json:"output"`
	Skipped    bool            `json:"skipped,omitempty"`
	Conditions map[string]bool `json:"conditions,omitempty"`
}

// Rerun is what a re-run asks for: FromStage restarts at that component and everything
// downstream of it; without it, Input (when set) runs the whole run again, and neither
// restarts at the stages that did not complete.
type Rerun struct {
	FromStage string
	Input     json.RawMessage
	// Iteration, when set, restarts only that iteration of FromStage, a top-level FOR_EACH:
	// its other iterations that completed are copied.
	Iteration *int
	// ConcurrencyKey is what the definition's concurrency key gave for the re-run's input,
	// when it has a concurrency.
	ConcurrencyKey string
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
	if err := orig.checkIteration(r); err != nil {
		return nil, err
	}
	if !orig.Status.Terminal() {
		return nil, domain.Conflict("run %s has not ended (%s); only an ended run can be re-run", orig.ID, orig.Status)
	}
	input := orig.Input
	if len(r.Input) > 0 {
		input = r.Input
	}
	// No ParentRunID, ParentStageID or Chain: a re-run of a child run is a top-level run, which
	// no parent waits for (docs/workflows.md, "Re-running a run").
	ev := Triggered{RunID: newRunID, WorkflowID: orig.WorkflowID, WorkspaceID: orig.WorkspaceID, APIKeyID: apiKeyID,
		TriggerID: orig.TriggerID, Definition: orig.Definition, Input: input, RerunOf: orig.ID,
		Conditions: conditions(orig.graph.Out[orig.TriggerID], input, input, when), At: now.UTC()}
	if orig.Definition.Concurrency != nil {
		ev.ConcurrencyKey = r.ConcurrencyKey
	}
	if r.FromStage != "" || len(r.Input) == 0 {
		ev.Reused = orig.reusable(orig.restart(r.FromStage))
		ev.Reused = append(ev.Reused, orig.reusableLoops(r.FromStage)...)
	}
	if r.Iteration != nil {
		ev.Reused = append(ev.Reused, orig.reusableIterations(r.FromStage, *r.Iteration)...)
	}
	return []domain.Event{ev}, nil
}

// restart is the components a re-run runs again: from and what is downstream of it, or,
// without from, every stage that did not complete and what is downstream of those. A
// FOR_EACH and its body are always in it, with what is downstream of them: body stages are
// copied per iteration (reusableIterations, reusableLoops), when the FOR_EACH is dispatched.
func (s *State) restart(from string) map[string]bool {
	return s.restartFrom(from, true)
}

// restartFrom is restart with or without the rule that every FOR_EACH and its body run again;
// without it, a body component restarts only from upstream (its stages are per iteration).
func (s *State) restartFrom(from string, loops bool) map[string]bool {
	var roots []string
	if from != "" {
		roots = append(roots, from)
	}
	for _, id := range s.graph.Order {
		if !s.scope[id] || id == s.TriggerID {
			continue
		}
		inBody := s.body[id] != ""
		if loops && (inBody || s.graph.Components[id].Module == workflow.ModuleForEach) {
			roots = append(roots, id)
			continue
		}
		if st, ok := s.stageAt(id, NoIteration); from == "" && !inBody && (!ok || st.Status != StageStatusCompleted) {
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
			out = append(out, reuseOf(st, ""))
		}
	}
	return out
}

func reuseOf(st Stage, loop string) Reuse {
	return Reuse{ComponentID: st.ComponentID, Loop: loop, Iteration: st.Iteration, Output: st.Output, Skipped: st.Skipped,
		Conditions: st.Conditions}
}

// checkIteration refuses an iteration that is not one of a top-level FOR_EACH fromStage
// without nested loops, as the run ran it.
func (s *State) checkIteration(r Rerun) error {
	if r.Iteration == nil {
		return nil
	}
	c := s.graph.Components[r.FromStage]
	if c.Module != workflow.ModuleForEach || s.body[r.FromStage] != "" {
		return domain.Invalid("iteration", "needs fromStage to be a FOR_EACH outside any other")
	}
	for b, f := range s.body {
		if f == r.FromStage && s.graph.Components[b].Module == workflow.ModuleForEach {
			return domain.Invalid("iteration", "FOR_EACH %q has a loop in its body; re-run it whole", r.FromStage)
		}
	}
	fe := s.forEaches[StageID(s.ID, r.FromStage, NoIteration)]
	if fe == nil || *r.Iteration < 0 || *r.Iteration >= len(fe.Items) {
		return domain.Invalid("iteration", "is not an iteration the run's FOR_EACH %q ran", r.FromStage)
	}
	return nil
}

// reusableLoops lists the body stages to copy of the top-level FOR_EACH loops (without a loop
// in their body) that nothing restarted feeds: the loop stage is created again, as always, and
// each of its iterations whose body stages all completed is copied rather than run and billed
// again (a re-run from a gather after the loop runs the gather alone).
func (s *State) reusableLoops(from string) []Reuse {
	fed := s.restartFrom(from, false)
	runsAgain := map[string]bool{} // by FOR_EACH: a loop in its body, or a body component fed
	for b, loop := range s.body {
		runsAgain[loop] = runsAgain[loop] || s.graph.Components[b].Module == workflow.ModuleForEach || fed[b]
	}
	var out []Reuse
	for _, id := range s.graph.Order {
		if !s.scope[id] || s.graph.Components[id].Module != workflow.ModuleForEach || s.body[id] != "" || fed[id] || runsAgain[id] {
			continue
		}
		if s.forEaches[StageID(s.ID, id, NoIteration)] != nil {
			out = append(out, s.reusableIterations(id, -1)...)
		}
	}
	return out
}

// reusableIterations lists the body stages of the iterations of FOR_EACH loop other than it
// (-1: all of them) whose body stages all completed.
func (s *State) reusableIterations(loop string, it int) []Reuse {
	loopID := StageID(s.ID, loop, NoIteration)
	var out []Reuse
	for i := range len(s.forEaches[loopID].Items) {
		if i == it {
			continue
		}
		var iter []Reuse
		for _, id := range s.graph.Order {
			if s.body[id] != loop || !s.scope[id] {
				continue
			}
			if st, ok := s.keyed(id, loopID, i); ok && st.Status == StageStatusCompleted {
				iter = append(iter, reuseOf(st, loop))
			}
		}
		if len(iter) == s.bodySize[loop] {
			out = append(out, iter...)
		}
	}
	return out
}

// reuse completes the top-level stages a re-run copies at its start, and keeps the body
// stages for when their FOR_EACH is dispatched (reuseBody): no execution, no usage.
func (s *State) reuse(rs []Reuse, at time.Time) {
	for _, r := range rs {
		if _, ok := s.graph.Components[r.ComponentID]; !ok {
			continue
		}
		if r.Loop != "" {
			if s.reusedBody == nil {
				s.reusedBody = map[string][]Reuse{}
			}
			s.reusedBody[r.Loop] = append(s.reusedBody[r.Loop], r)
			continue
		}
		s.copyStage(r, Dispatch{StageID: StageID(s.ID, r.ComponentID, NoIteration), ComponentID: r.ComponentID,
			Iteration: NoIteration, Skipped: r.Skipped}, at)
	}
}

// reuseBody copies the reused body stages of the top-level FOR_EACH stage d just dispatched.
func (s *State) reuseBody(d Dispatch, at time.Time) {
	fe := s.forEaches[d.StageID]
	if d.ParentStageID != "" || fe == nil {
		return
	}
	for _, r := range s.reusedBody[d.ComponentID] {
		if r.Iteration < 0 || r.Iteration >= len(fe.Items) {
			continue
		}
		s.copyStage(r, Dispatch{StageID: StageID(s.ID, r.ComponentID, r.Iteration), ComponentID: r.ComponentID,
			Iteration: r.Iteration, ParentStageID: d.StageID, Skipped: r.Skipped}, at)
	}
}

// copyStage creates the stage of d COMPLETED with r's output, marked reused.
func (s *State) copyStage(r Reuse, d Dispatch, at time.Time) {
	s.dispatch(d, at)
	s.Stages[s.byID[d.StageID]].Reused = true
	out := r.Output
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	s.complete(StageCompleted{StageID: d.StageID, Output: out, Conditions: r.Conditions, At: at})
}

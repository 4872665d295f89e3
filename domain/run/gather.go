package run

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// loop is what a FOR_EACH's config.body adds to its progress: the components downstream of
// the body run once after every iteration ended, and gather the body's outputs (gathered).
type loop struct {
	gathers   bool // config.body is set
	onFailure string
	// running counts the body stages dispatched and not yet ended, by open iteration.
	running map[int]int
	// failed holds the iterations one of whose body stages failed: they dispatch nothing more
	// and end once their running stages ended.
	failed map[int]bool
}

func newLoop(cfg workflow.ForEachConfig) loop {
	return loop{gathers: len(cfg.Body) > 0, onFailure: cfg.OnFailure, running: map[int]int{}}
}

func (l loop) clone() loop {
	l.running, l.failed = maps.Clone(l.running), maps.Clone(l.failed)
	return l
}

// stopped reports whether iteration it failed, so that nothing more of it runs.
func (fe *forEach) stopped(it int) bool { return fe != nil && fe.failed[it] }

// failedIterations lists the failed iterations in order; never nil, so it encodes as [].
func (fe *forEach) failedIterations() []int {
	out := make([]int, 0, len(fe.failed))
	for it := range fe.failed {
		out = append(out, it)
	}
	slices.Sort(out)
	return out
}

// output is the FOR_EACH stage's output once its n iterations ended.
func (fe *forEach) output(n int) json.RawMessage {
	var out []byte
	if fe.gathers {
		out, _ = json.Marshal(map[string]any{"count": n, "failed": fe.failedIterations()})
	} else {
		out, _ = json.Marshal(map[string]int{"count": n})
	}
	return out
}

func (s *State) bodyDispatched(d Dispatch) {
	if fe := s.forEaches[d.ParentStageID]; fe != nil {
		fe.running[d.Iteration]++
	}
}

// bodyEnded counts a body stage of iteration it that ended; a failed iteration is done when
// its last running stage ended.
func (s *State) bodyEnded(fe *forEach, it int) {
	fe.running[it]--
	if fe.running[it] > 0 {
		return
	}
	delete(fe.running, it)
	if _, open := fe.completed[it]; open && fe.failed[it] {
		fe.Done++
		delete(fe.completed, it)
	}
}

// iterationFailed records the failure of a stage of an explicit FOR_EACH body in its
// iteration, and reports whether the FOR_EACH absorbs it (onFailure "continue") instead of
// the run failing.
func (s *State) iterationFailed(stageID string) bool {
	st, _ := s.Stage(stageID)
	fe := s.forEaches[st.ParentStageID]
	if fe == nil || !fe.gathers {
		return false
	}
	if _, open := fe.completed[st.Iteration]; !open {
		return false
	}
	if fe.failed == nil {
		fe.failed = map[int]bool{}
	}
	fe.failed[st.Iteration] = true
	s.bodyEnded(fe, st.Iteration)
	if s.tolerates(st.ParentStageID) {
		s.tolerated++
		return true
	}
	return false
}

// FailedStages counts the run's FAILED stages, those an onFailure "continue" tolerated included.
func (s *State) FailedStages() int { return s.Failed + s.tolerated }

// tolerates reports whether a failure in the FOR_EACH stage loopID leaves the run going: its
// onFailure is "continue", or it is "fail" and the loop's own failure is tolerated by the
// enclosing loop's "continue".
func (s *State) tolerates(loopID string) bool {
	for loopID != "" {
		fe := s.forEaches[loopID]
		if fe == nil || !fe.gathers {
			return false
		}
		if fe.onFailure == workflow.OnFailureContinue {
			return true
		}
		ls, _ := s.Stage(loopID)
		loopID = ls.ParentStageID
	}
	return false
}

// failLoops fails an open FOR_EACH with an explicit body and onFailure "fail" at its first
// failed iteration, so that its stage tells which iteration ended the run.
func (s *State) failLoops(now time.Time) domain.Event {
	var failing []string // the least id is failed first, so the same state decides the same event
	for id, fe := range s.forEaches {
		if fe.gathers && fe.onFailure == workflow.OnFailureFail && len(fe.failed) > 0 {
			if st, _ := s.Stage(id); !st.Status.Terminal() {
				failing = append(failing, id)
			}
		}
	}
	if len(failing) == 0 {
		return nil
	}
	id := slices.Min(failing)
	st, _ := s.Stage(id)
	first := s.forEaches[id].failedIterations()[0]
	msg := fmt.Sprintf("iteration %d of %s %q failed (onFailure %q)", first, workflow.ModuleForEach, st.ComponentID, workflow.OnFailureFail)
	return StageFailed{RunID: s.ID, StageID: id, Error: failure("iteration_failed", msg, id), At: now}
}

// gatherEdge reports whether e leaves a FOR_EACH body for a component outside it: its `to`
// runs once, after the loop, with the body's outputs gathered. A component of a loop nested in
// that body is inside it: it runs in the same iteration.
func (s *State) gatherEdge(e workflow.Edge) bool {
	loop, to := s.body[e.From], s.body[e.To]
	return loop != "" && to != loop && (to == "" || s.body[to] != loop)
}

// lookup finds the stage of component seen from iteration it of the FOR_EACH stage loop (the
// zero Stage outside any): the one of the same iteration when component is in loop's body, of
// the enclosing iteration when it is in the outer loop's body, the one stage otherwise.
func (s *State) lookup(component string, loop Stage, it int) (Stage, bool) {
	for loop.ID != "" && s.body[component] != loop.ComponentID {
		it = loop.Iteration
		loop, _ = s.Stage(loop.ParentStageID)
	}
	if loop.ID == "" {
		return s.keyed(component, "", NoIteration)
	}
	return s.keyed(component, loop.ID, it)
}

// stageID names the stage of component in iteration it of the FOR_EACH stage fe; inside a
// nested loop the outer iteration is part of the name.
func (s *State) stageID(component string, fe Stage, it int) string {
	if fe.ParentStageID == "" {
		return StageID(s.ID, component, it)
	}
	return StageID(s.ID, fmt.Sprintf("%s/%d", component, fe.Iteration), it)
}

// loopOf is the stage of the FOR_EACH whose body holds component, seen from iteration it of
// the FOR_EACH stage loop, and its progress.
func (s *State) loopOf(component string, loop Stage, it int) (Stage, *forEach, bool) {
	st, ok := s.lookup(s.body[component], loop, it)
	if !ok {
		return Stage{}, nil, false
	}
	return st, s.forEaches[st.ID], true
}

// loopEnded reports whether the FOR_EACH whose body holds component completed (or was skipped).
func (s *State) loopEnded(component string, loop Stage, it int) bool {
	st, _, ok := s.loopOf(component, loop, it)
	return ok && st.Status == StageStatusCompleted
}

// loopRan reports whether the FOR_EACH whose body holds component completed its iterations.
func (s *State) loopRan(component string, loop Stage, it int) bool {
	st, fe, ok := s.loopOf(component, loop, it)
	return ok && fe != nil && st.Status == StageStatusCompleted && !st.Skipped
}

// gathered is what gather edge e carries into iteration it of loop: {"items": [e.From's output
// per iteration, null for a failed iteration or one where it did not complete], "failed":
// [failed iterations]}.
func (s *State) gathered(e workflow.Edge, loop Stage, it int) json.RawMessage {
	ls, fe, ok := s.loopOf(e.From, loop, it)
	if !ok || fe == nil {
		return json.RawMessage("null")
	}
	items := make([]json.RawMessage, len(fe.Items))
	for i := range items {
		items[i] = json.RawMessage("null")
		if st, ok := s.keyed(e.From, ls.ID, i); ok && !fe.failed[i] && st.Status == StageStatusCompleted && len(st.Output) > 0 {
			items[i] = st.Output
		}
	}
	out, _ := json.Marshal(map[string]any{"items": items, "failed": fe.failedIterations()})
	return out
}

// upstreamOutput is the output edge e carries into iteration it of loop (the FOR_EACH source).
func (s *State) upstreamOutput(e workflow.Edge, loop Stage, it int) (json.RawMessage, bool) {
	if fe := s.forEaches[loop.ID]; fe != nil && e.From == loop.ComponentID && it < len(fe.Items) {
		return feed(fe, it), true // a FOR_EACH nested right after its outer one
	}
	if s.gatherEdge(e) {
		return s.gathered(e, loop, it), s.loopRan(e.From, loop, it)
	}
	up, ok := s.lookup(e.From, loop, it)
	return up.Output, ok
}

// bodies maps each body component in scope to its innermost FOR_EACH, and counts each
// FOR_EACH's own body components (those of a loop nested in it are the nested loop's).
func bodies(g workflow.Graph, scope map[string]bool) (map[string]string, map[string]int) {
	body, size := map[string]string{}, map[string]int{}
	for b, f := range g.InnermostBodies() {
		if scope[f] {
			body[b] = f
			if scope[b] {
				size[f]++
			}
		}
	}
	return body, size
}

// feed is what a FOR_EACH gives its body in iteration it.
func feed(fe *forEach, it int) json.RawMessage {
	item, _ := json.Marshal(map[string]any{"item": fe.Items[it], "index": it})
	return item
}

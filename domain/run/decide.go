package run

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Condition tells whether edge e (one with a `when`) is taken for its upstream's output and
// the run's trigger body. The caller evaluates it (commands, with the expr.eval language of
// modules): an expression may run for a while, may read the clock (expr's now()) and its
// library may change between releases, so evaluating it while folding would not be pure, nor
// give a replay of an old log the same answer. The decisions call it only while deciding an
// event and record its answers in that event (Conditions); folding reads them from there.
type Condition func(e workflow.Edge, output, trigger json.RawMessage) bool

// DecideTrigger starts a run of def from its trigger component triggerID; when decides the
// conditions of the edges out of the trigger. key is what def's concurrency key gave for input
// (ignored when def has no concurrency).
func DecideTrigger(s State, runID, workspaceID, workflowID, apiKeyID, triggerID string, def workflow.Definition, input json.RawMessage, key string, when Condition, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	conds := conditions(def.Graph().Out[triggerID], input, input, when)
	t := Triggered{RunID: runID, WorkflowID: workflowID, WorkspaceID: workspaceID, APIKeyID: apiKeyID,
		TriggerID: triggerID, Definition: def, Input: input, Conditions: conds, At: now.UTC()}
	if def.Concurrency != nil {
		t.ConcurrencyKey = key
	}
	return []domain.Event{t}, nil
}

// conditions evaluates the `when` of the conditional edges among out; nil when there is none.
// A nil Condition takes no conditional edge.
func conditions(out []workflow.Edge, output, trigger json.RawMessage, when Condition) map[string]bool {
	var m map[string]bool
	for _, e := range out {
		if e.When == "" {
			continue
		}
		if m == nil {
			m = map[string]bool{}
		}
		m[e.To] = when != nil && when(e, output, trigger)
	}
	return m
}

// MaxReasonLength bounds a cancellation's reason.
const MaxReasonLength = 1000

// DecideCancel ends a run FAILED with the cancellation recorded; a finished run is a conflict.
func DecideCancel(s State, reason string, now time.Time) ([]domain.Event, error) {
	if !s.Exists {
		return nil, domain.ErrNotFound
	}
	if len(reason) > MaxReasonLength {
		return nil, domain.Invalid("reason", "must be at most %d characters", MaxReasonLength)
	}
	if s.Status.Terminal() {
		return nil, domain.Conflict("run %s has already finished (%s); only a running run can be cancelled", s.ID, s.Status)
	}
	msg := "the run was canceled"
	if reason != "" {
		msg += ": " + reason
	}
	return []domain.Event{
		CancelRequested{RunID: s.ID, Reason: reason, At: now.UTC()},
		Finished{RunID: s.ID, Status: StatusFailed, Error: failure("canceled", msg, ""),
			Abort: failure("canceled", "the run was canceled before this stage finished", ""), QueueID: s.QueueID, At: now.UTC()},
	}, nil
}

// FactKind is what happened to a stage's execution.
type FactKind int

// The facts the scheduler reads from execution events.
const (
	FactStarted FactKind = iota + 1
	FactCompleted
	FactFailed
)

// Fact is an execution event of a stage, as the scheduler saw it.
type Fact struct {
	ExecutionID string
	Kind        FactKind
	Attempt     int
	Output      json.RawMessage
	Error       json.RawMessage
	Usage       billing.Credits
	At          time.Time
	// StageID names the RUN_WORKFLOW stage a fact about a child run is for (ExecutionID is
	// empty then).
	StageID string
}

// Step records facts and then advances the run as far as it can go: it returns the events of
// both, and the module stages dispatched (whose executions the caller then submits). Facts
// about stages already ended, or arriving after the run ended, are ignored: a cancelled run's
// late results change nothing. when decides the conditions of the edges out of the stages
// that complete.
func Step(s State, facts []Fact, when Condition, now time.Time) ([]domain.Event, []Stage) {
	return StepWith(s, facts, Eval{When: when}, now)
}

// Eval holds what the decisions ask the caller to evaluate: edges' conditions and WAIT
// stages' until expressions (Condition says why the domain does not evaluate them).
type Eval struct {
	When  Condition
	Until Until
}

// StepWith is Step with every evaluator: a run with WAIT stages needs Until.
func StepWith(s State, facts []Fact, ev Eval, now time.Time) ([]domain.Event, []Stage) {
	if !s.Exists || s.Status.Terminal() {
		return nil, nil
	}
	c := s.Clone()
	var events []domain.Event
	for _, f := range facts {
		if e := c.record(f, ev.When); e != nil {
			c.Apply(e)
			events = append(events, e)
		}
	}
	events, dispatched := c.proceed(startsInEnds(events), ev, now)
	return dispatchesInEnds(events), dispatched
}

// dispatchesInEnds writes each StagesDispatched that directly follows a StageCompleted inside
// it (StageCompleted.Then): the dispatch a stage's end leads to is then one event with the
// end, not two, and folds to the same state, the end applied first.
func dispatchesInEnds(events []domain.Event) []domain.Event {
	out := make([]domain.Event, 0, len(events))
	for _, e := range events {
		if d, ok := e.(StagesDispatched); ok && len(out) > 0 {
			if end, ok := out[len(out)-1].(StageCompleted); ok && end.Then == nil {
				end.Then = &d
				out[len(out)-1] = end
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// startsInEnds leaves out of events each StageStarted whose stage ends later in them, and
// gives its attempt to the end instead: a stage whose start and end are recorded together
// (a call the runner ran to its end, the usual case) then writes one event, not two, and
// folds to the same state.
func startsInEnds(events []domain.Event) []domain.Event {
	end := map[string]int{} // stage id -> index of its end in events
	for i, e := range events {
		if id, ok := endedStage(e); ok {
			end[id] = i
		}
	}
	attempt := map[string]int{} // stage id -> the attempt its left-out start recorded
	for i, e := range events {
		if st, ok := e.(StageStarted); ok && end[st.StageID] > i {
			attempt[st.StageID] = st.Attempt
		}
	}
	if len(attempt) == 0 {
		return events
	}
	out := make([]domain.Event, 0, len(events))
	for i, e := range events {
		switch e := e.(type) {
		case StageStarted:
			if end[e.StageID] > i {
				continue
			}
		case StageCompleted:
			if a, ok := attempt[e.StageID]; ok {
				e.Attempt = a
				out = append(out, e)
				continue
			}
		case StageFailed:
			if a, ok := attempt[e.StageID]; ok {
				e.Attempt = a
				out = append(out, e)
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// endedStage is the stage e ends, if it ends one.
func endedStage(e domain.Event) (string, bool) {
	switch e := e.(type) {
	case StageCompleted:
		return e.StageID, true
	case StageFailed:
		return e.StageID, true
	}
	return "", false
}

// proceed advances c, a clone the caller owns with events already applied, as far as it can go.
func (c *State) proceed(events []domain.Event, ev Eval, now time.Time) ([]domain.Event, []Stage) {
	var dispatched []Stage
	for round := 0; round < 1000; round++ {
		e := c.advance(now.UTC(), ev)
		if e == nil {
			break
		}
		if f, ok := e.(Finished); ok {
			f.QueueID = c.QueueID // its end frees its queue's slot
			e = f
		}
		c.Apply(e)
		events = append(events, e)
		if d, ok := e.(StagesDispatched); ok {
			for _, st := range d.Stages {
				if st.ExecutionID != "" || st.ChildRunID != "" {
					got, _ := c.Stage(st.StageID)
					dispatched = append(dispatched, got)
				}
			}
		}
	}
	return events, dispatched
}

func (s *State) record(f Fact, when Condition) domain.Event {
	st, ok := s.stageOfFact(f)
	if !ok || st.Status.Terminal() {
		return nil
	}
	switch f.Kind {
	case FactStarted:
		if st.Status == StageStatusCreated || f.Attempt > st.Attempt {
			return StageStarted{RunID: s.ID, StageID: st.ID, Attempt: f.Attempt, At: f.At.UTC()}
		}
	case FactCompleted:
		out := f.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		return StageCompleted{RunID: s.ID, StageID: st.ID, Output: out, CreditUsage: f.Usage,
			Conditions: conditions(s.graph.Out[st.ComponentID], out, s.Input, when), At: f.At.UTC()}
	case FactFailed:
		return StageFailed{RunID: s.ID, StageID: st.ID, Error: f.Error, At: f.At.UTC()}
	}
	return nil
}

// advance returns the next event the run needs, or nil when it waits for executions.
func (s *State) advance(now time.Time, ev Eval) domain.Event {
	if s.Status.Terminal() {
		return nil
	}
	if d := s.Deadline(); !d.IsZero() && !now.Before(d) {
		return s.timedOut(now)
	}
	if s.Waiting() {
		return nil // held CREATED until its concurrency queue admits it
	}
	if e := s.failLoops(now); e != nil {
		return e
	}
	if s.Failed > 0 || !s.CancelAt.IsZero() {
		if s.Pending-s.openForEaches()-s.openWaits() > 0 {
			return nil // let running stages finish, so their usage and failures are counted; waits are abandoned
		}
		return s.failedEnd(now)
	}
	if e := s.settleForEaches(now); e != nil {
		return e
	}
	if e := s.settleWaits(now, ev); e != nil {
		return e
	}
	if d := s.ready(); len(d) > 0 {
		return StagesDispatched{RunID: s.ID, Stages: d, At: now}
	}
	if s.Pending == 0 {
		return Finished{RunID: s.ID, Status: StatusCompleted, At: now}
	}
	return nil
}

// timedOut ends a run stepped at or after its deadline FAILED with code run_timeout, its
// open stages cancelled as a cancellation cancels them: their executions' late results
// change nothing.
func (s *State) timedOut(now time.Time) domain.Event {
	msg := fmt.Sprintf("the run did not finish within its timeoutMs (%d ms)", s.Definition.TimeoutMs)
	return Finished{RunID: s.ID, Status: StatusFailed, Error: failure(CodeRunTimeout, msg, ""),
		Abort: failure("canceled", "the run timed out before this stage finished", ""), At: now}
}

// CodeRunTimeout is the error code of a run that passed its definition's timeoutMs.
const CodeRunTimeout = "run_timeout"

func (s *State) openForEaches() int {
	n := 0
	for id := range s.forEaches {
		if st, _ := s.Stage(id); !st.Status.Terminal() {
			n++
		}
	}
	return n
}

func (s *State) failedEnd(now time.Time) domain.Event {
	var first Stage
	for _, st := range s.Stages {
		if st.Status == StageStatusFailed {
			first = st
			break
		}
	}
	msg := fmt.Sprintf("stage %s (component %q) failed", first.ID, first.ComponentID)
	return Finished{RunID: s.ID, Status: StatusFailed, Error: failure("stage_failed", msg, first.ID),
		Abort: failure("aborted", "another stage of the run failed before this one finished", ""), At: now}
}

// settleForEaches ends a FOR_EACH whose items are not an array, or whose iterations are done.
func (s *State) settleForEaches(now time.Time) domain.Event {
	for _, st := range s.Stages {
		fe := s.forEaches[st.ID]
		if fe == nil || st.Status.Terminal() {
			continue
		}
		if fe.Items == nil {
			cfg, _ := workflow.ParseForEach(s.graph.Components[st.ComponentID].Config)
			return StageFailed{RunID: s.ID, StageID: st.ID, At: now, Error: failure("not_an_array",
				fmt.Sprintf("the value at %q in the upstream output is not an array", cfg.Items), st.ID)}
		}
		if len(fe.Items) > workflow.MaxItems {
			return StageFailed{RunID: s.ID, StageID: st.ID, At: now, Error: failure("too_many_items",
				fmt.Sprintf("%d items; a %s iterates over at most %d", len(fe.Items), workflow.ModuleForEach, workflow.MaxItems), st.ID)}
		}
		if fe.Done == len(fe.Items) {
			out := fe.output(len(fe.Items))
			return StageCompleted{RunID: s.ID, StageID: st.ID, Output: out, At: now}
		}
	}
	return nil
}

// ready lists the stages whose upstream stages have all completed, admitting new FOR_EACH
// iterations while fewer than the concurrency are open. A stage none of whose incoming edges
// was taken is listed skipped.
func (s *State) ready() []Dispatch {
	var out []Dispatch
	for _, id := range s.graph.Order {
		if !s.scope[id] || s.body[id] != "" || id == s.TriggerID {
			continue
		}
		if _, ok := s.stageAt(id, NoIteration); !ok && s.upstreamsDone(id, NoIteration, Stage{}) {
			out = append(out, s.dispatchOf(id, NoIteration, Stage{}))
		}
	}
	for _, st := range s.Stages {
		fe := s.forEaches[st.ID]
		if fe == nil || st.Status.Terminal() || len(fe.Items) > workflow.MaxItems {
			continue
		}
		for it := range fe.completed {
			out = append(out, s.readyIn(st, it)...)
		}
		for next := fe.Started; next < len(fe.Items) && next-fe.Done < fe.Concurrency; next++ {
			batch := s.readyIn(st, next)
			if len(batch) == 0 {
				break // iterations differ only in their item: if this one cannot start, none can
			}
			out = append(out, batch...)
			fe.Started, fe.completed[next] = next+1, 0 // the dispatch event does the same
		}
	}
	return out
}

// readyIn lists the ready stages of iteration it of the FOR_EACH stage fe.
func (s *State) readyIn(fe Stage, it int) []Dispatch {
	if s.forEaches[fe.ID].stopped(it) {
		return nil
	}
	var out []Dispatch
	for _, id := range s.graph.Order {
		if s.body[id] != fe.ComponentID {
			continue
		}
		if _, ok := s.keyed(id, fe.ID, it); !ok && s.upstreamsDone(id, it, fe) {
			out = append(out, s.dispatchOf(id, it, fe))
		}
	}
	return out
}

// upstreamsDone reports whether every in-scope upstream of component id has completed for
// iteration it of the FOR_EACH stage loop (a FOR_EACH feeds its body as soon as the iteration
// is admitted).
func (s *State) upstreamsDone(id string, it int, loop Stage) bool {
	for _, e := range s.graph.In[id] {
		if !s.scope[e.From] || e.From == loop.ComponentID {
			continue
		}
		if s.gatherEdge(e) {
			if !s.loopEnded(e.From, loop, it) {
				return false
			}
			continue
		}
		up, ok := s.lookup(e.From, loop, it)
		if !ok || up.Status != StageStatusCompleted {
			return false
		}
	}
	return true
}

// dispatchOf is the dispatch of component in iteration it of the FOR_EACH stage fe (the zero
// Stage outside any), once its upstreams completed.
func (s *State) dispatchOf(component string, it int, fe Stage) Dispatch {
	d := Dispatch{StageID: s.stageID(component, fe, it), ComponentID: component, Iteration: it, ParentStageID: fe.ID}
	if !slices.ContainsFunc(s.graph.In[component], func(e workflow.Edge) bool { return s.taken(e, it, fe) }) {
		d.Skipped = true
		return d
	}
	if !s.graph.Components[component].Control() {
		d.ExecutionID = ExecutionID(d.StageID)
	}
	if s.graph.Components[component].Module == workflow.ModuleRunWorkflow {
		d.ChildRunID = ChildRunID(s.ID, d.StageID, 1)
	}
	return d
}

// taken reports whether edge e into a stage of iteration it of the FOR_EACH stage loop (the
// zero Stage outside any) was taken: a FOR_EACH always feeds its body; any other upstream stage must have run (not skipped) and the edge's
// condition, if it has one, must have held for its output.
func (s *State) taken(e workflow.Edge, it int, loop Stage) bool {
	if !s.scope[e.From] {
		return false
	}
	if e.From == loop.ComponentID && loop.ID != "" {
		return true
	}
	if s.gatherEdge(e) {
		return s.loopRan(e.From, loop, it)
	}
	up, ok := s.lookup(e.From, loop, it)
	return ok && up.Status == StageStatusCompleted && !up.Skipped && (e.When == "" || up.Conditions[e.To])
}

// StageInput is the input of a dispatched stage, built from the outputs of the upstream stages
// whose edges were taken (Edge).
func (s *State) StageInput(st Stage) json.RawMessage {
	var ups []workflow.Upstream
	loop, _ := s.Stage(st.ParentStageID)
	for _, e := range s.graph.In[st.ComponentID] {
		if !s.scope[e.From] {
			continue
		}
		if fe, ok := s.forEaches[st.ParentStageID]; ok && e.From == s.body[st.ComponentID] {
			ups = append(ups, workflow.Upstream{Edge: e, Output: feed(fe, st.Iteration)})
			continue
		}
		if !s.taken(e, st.Iteration, loop) {
			continue
		}
		if s.gatherEdge(e) {
			ups = append(ups, workflow.Upstream{Edge: e, Output: s.gathered(e, loop, st.Iteration)})
			continue
		}
		up, _ := s.lookup(e.From, loop, st.Iteration)
		ups = append(ups, workflow.Upstream{Edge: e, Output: up.Output})
	}
	return workflow.BuildInput(ups)
}

// Component returns the definition of the component a stage runs.
func (s *State) Component(st Stage) workflow.Component { return s.graph.Components[st.ComponentID] }

func failure(code, message, stageID string) json.RawMessage {
	f := map[string]string{"code": code, "message": message}
	if stageID != "" {
		f["stageId"] = stageID
	}
	b, _ := json.Marshal(f)
	return b
}

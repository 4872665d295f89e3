package run

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Stage is one stage of a run (SPEC.md 2.5, 2.6).
type Stage struct {
	ID            string
	ComponentID   string
	Name          string
	Module        string
	Iteration     int
	ParentStageID string
	Status        StageStatus
	Output        json.RawMessage
	Error         json.RawMessage
	CreditUsage   billing.Credits
	ExecutionID   string
	// Skipped: none of the stage's incoming edges was taken, so it completed without running.
	Skipped bool
	// ChildRunID is the run a RUN_WORKFLOW stage starts.
	ChildRunID string
	// Reused: a re-run copied the stage from the run it re-runs; it did not run here.
	Reused bool
	// Conditions is what the `when` of the stage's conditional outgoing edges gave, by
	// downstream component; shared between copies of the state, never changed once set.
	Conditions map[string]bool
	// Waiting is what an open WAIT stage waits for (StageWaiting); nil before it waits.
	Waiting      *WaitingFor
	DispatchedAt time.Time
	Attempt      int
	UpdatedAt    time.Time
}

// forEach is the progress of a FOR_EACH stage.
type forEach struct {
	Items       []json.RawMessage
	Concurrency int
	// Started counts the iterations admitted (0..Started-1); Done those whose body completed.
	Started, Done int
	// completed counts the completed body stages of each open iteration (admitted, not done).
	completed map[int]int
	// loop holds what a config.body gives the iterations (gather.go).
	loop
}

// stageKey finds a stage by component, the FOR_EACH stage it iterates in ("" outside any)
// and its iteration: a nested loop's body runs once per item of each outer iteration.
type stageKey struct {
	component string
	parent    string
	iteration int
}

// State is a run folded from its stream. It is a value: Evolve leaves its receiver as it was.
// A long FOR_EACH run has thousands of stages, too many to copy per event, so folds that own
// their state (a Clone, or one built from the zero State) use Apply, which changes it in place.
type State struct {
	Exists      bool
	ID          string
	WorkflowID  string
	WorkspaceID string
	APIKeyID    string
	TriggerID   string
	Definition  workflow.Definition
	Input       json.RawMessage
	// ParentRunID, ParentStageID and Chain place a child run (Triggered).
	ParentRunID   string
	ParentStageID string
	Chain         []string
	// RerunOf is the run this one re-runs (Triggered).
	RerunOf string
	// ConcurrencyKey and QueueID place a run of a definition with a concurrency in its queue;
	// Admitted is set once the queue gave it a slot (Waiting).
	ConcurrencyKey string
	QueueID        string
	Admitted       bool
	Status         Status
	Error          json.RawMessage

	Stages       []Stage
	Pending      int
	Failed       int
	TotalUsage   billing.Credits
	CancelAt     time.Time
	CancelReason string
	// Signals are the signals kept for stages that do not wait for them yet, in arrival order.
	Signals   []Signal
	CreatedAt time.Time
	UpdatedAt time.Time

	graph     workflow.Graph
	scope     map[string]bool
	body      map[string]string // body component -> its FOR_EACH component
	bodySize  map[string]int    // FOR_EACH component -> body components in scope
	byID      map[string]int
	byKey     map[stageKey]int
	byExec    map[string]int
	forEaches map[string]*forEach // by stage id
	// waits are the WAIT stages dispatched and not ended, by id; signalIDs every signal id the
	// run has received (the dedup of DecideSignal).
	waits     map[string]bool
	signalIDs map[string]bool
	// reusedBody holds the body stages a re-run copies, by FOR_EACH component (reuseBody); set
	// once by Triggered and never changed, so copies of the state share it.
	reusedBody map[string][]Reuse
	// tolerated counts the failed stages of FOR_EACH iterations with onFailure "continue":
	// FAILED stages that do not fail the run (not in Failed).
	tolerated int
}

// Waiting reports whether the run waits in its concurrency queue for a slot: it stays
// CREATED, and nothing of it is dispatched, until admitted.
func (s *State) Waiting() bool { return s.QueueID != "" && !s.Admitted && !s.Status.Terminal() }

// JobID is the id of the run's trigger stage, returned by the trigger call as jobId.
func (s *State) JobID() string { return StageID(s.ID, s.TriggerID, NoIteration) }

// Deadline is when the run times out (its definition's timeoutMs after its trigger); zero
// when it has no timeout.
func (s *State) Deadline() time.Time {
	if s.Definition.TimeoutMs <= 0 {
		return time.Time{}
	}
	return s.CreatedAt.Add(time.Duration(s.Definition.TimeoutMs) * time.Millisecond)
}

// Clone copies the state so that evolving the copy leaves s as it is.
func (s *State) Clone() State {
	c := *s
	c.Stages = append([]Stage(nil), s.Stages...)
	c.byID, c.byKey, c.byExec = maps.Clone(s.byID), maps.Clone(s.byKey), maps.Clone(s.byExec)
	c.waits, c.signalIDs = maps.Clone(s.waits), maps.Clone(s.signalIDs)
	c.Signals = append([]Signal(nil), s.Signals...)
	c.forEaches = make(map[string]*forEach, len(s.forEaches))
	for id, fe := range s.forEaches {
		cp := *fe
		cp.completed = maps.Clone(fe.completed)
		cp.loop = fe.loop.clone()
		c.forEaches[id] = &cp
	}
	return c
}

// Stage finds a stage by id.
func (s *State) Stage(id string) (Stage, bool) {
	i, ok := s.byID[id]
	if !ok {
		return Stage{}, false
	}
	return s.Stages[i], true
}

// Alone reports whether stage id is the only stage of s in flight: no other outcome of the
// run can then be recorded before its own.
func (s *State) Alone(id string) bool {
	for _, other := range s.Stages {
		if other.ID != id && !other.Status.Terminal() {
			return false
		}
	}
	return true
}

// StageOfExecution finds the stage an execution runs.
func (s *State) StageOfExecution(executionID string) (Stage, bool) {
	i, ok := s.byExec[executionID]
	if !ok {
		return Stage{}, false
	}
	return s.Stages[i], true
}

// Evolve returns s with one event applied; s itself is left as it was.
func (s State) Evolve(e domain.Event) State {
	if !s.Exists {
		s.Apply(e) // nothing to share yet
		return s
	}
	c := s.Clone()
	c.Apply(e)
	return c
}

// Apply applies one event to s in place. Only for a state no one else holds: its stages and
// indexes are changed through the maps and slices a copy of s would share.
func (s *State) Apply(e domain.Event) {
	if _, ok := e.(Triggered); !ok && !s.Exists {
		return
	}
	switch ev := e.(type) {
	case Triggered:
		*s = s.start(ev)
	case StagesDispatched:
		for _, d := range ev.Stages {
			s.dispatch(d, ev.At)
			s.reuseBody(d, ev.At)
			if d.Skipped {
				s.complete(StageCompleted{StageID: d.StageID, Output: json.RawMessage("null"), At: ev.At})
			}
		}
		if s.Status == StatusCreated {
			s.Status = StatusExecuting
		}
	case StageStarted:
		s.change(ev.StageID, ev.At, func(st *Stage) { st.Status, st.Attempt = StageStatusRunning, ev.Attempt })
	case StageCompleted:
		s.complete(ev)
		delete(s.waits, ev.StageID)
		if ev.SignalID != "" {
			s.Signals = slices.DeleteFunc(s.Signals, func(g Signal) bool { return g.ID == ev.SignalID })
		}
		if ev.Then != nil {
			s.Apply(*ev.Then)
		}
	case StageFailed:
		if s.change(ev.StageID, ev.At, func(st *Stage) {
			st.Status, st.Error, st.Attempt = StageStatusFailed, ev.Error, max(st.Attempt, ev.Attempt)
		}) && !s.iterationFailed(ev.StageID) {
			s.Failed++
		}
		delete(s.waits, ev.StageID)
	case StageWaiting:
		w := ev.WaitingFor
		s.change(ev.StageID, ev.At, func(st *Stage) { st.Status, st.Waiting = StageStatusRunning, &w })
	case SignalReceived:
		if !s.signalIDs[ev.ID] {
			s.signalIDs[ev.ID] = true
			s.Signals = append(s.Signals, ev.Signal)
		}
	case CancelRequested:
		s.CancelAt, s.CancelReason = ev.At, ev.Reason
	case Admitted:
		s.Admitted = true
	case Finished:
		s.finish(ev)
	default:
		return
	}
	s.UpdatedAt = eventTime(e)
}

func (s State) start(ev Triggered) State {
	s = State{Exists: true, ID: ev.RunID, WorkflowID: ev.WorkflowID, WorkspaceID: ev.WorkspaceID, APIKeyID: ev.APIKeyID,
		TriggerID: ev.TriggerID, Definition: ev.Definition, Input: ev.Input, Status: StatusCreated, CreatedAt: ev.At,
		byID: map[string]int{}, byKey: map[stageKey]int{}, byExec: map[string]int{}, forEaches: map[string]*forEach{},
		waits: map[string]bool{}, signalIDs: map[string]bool{}}
	s.ParentRunID, s.ParentStageID, s.Chain, s.RerunOf = ev.ParentRunID, ev.ParentStageID, ev.Chain, ev.RerunOf
	if ev.Definition.Concurrency != nil {
		s.ConcurrencyKey, s.QueueID = ev.ConcurrencyKey, QueueID(ev.WorkflowID, ev.ConcurrencyKey)
	}
	s.graph = ev.Definition.Graph()
	s.scope = s.graph.Reachable(ev.TriggerID)
	s.body, s.bodySize = bodies(s.graph, s.scope)
	s.dispatch(Dispatch{StageID: s.JobID(), ComponentID: ev.TriggerID, Iteration: NoIteration}, ev.At)
	s.complete(StageCompleted{StageID: s.JobID(), Output: ev.Input, Conditions: ev.Conditions, At: ev.At})
	s.reuse(ev.Reused, ev.At)
	return s
}

func (s *State) dispatch(d Dispatch, at time.Time) {
	if _, dup := s.byID[d.StageID]; dup {
		return
	}
	c := s.graph.Components[d.ComponentID]
	st := Stage{ID: d.StageID, ComponentID: c.ID, Name: c.Name, Module: c.Module, Iteration: d.Iteration,
		ParentStageID: d.ParentStageID, Status: StageStatusCreated, ExecutionID: d.ExecutionID, Skipped: d.Skipped, ChildRunID: d.ChildRunID,
		DispatchedAt: at, Attempt: 1, UpdatedAt: at}
	s.byID[st.ID] = len(s.Stages)
	s.byKey[stageKey{c.ID, d.ParentStageID, d.Iteration}] = len(s.Stages)
	if st.ExecutionID != "" {
		s.byExec[st.ExecutionID] = len(s.Stages)
	}
	if d.ParentStageID != "" {
		if fe := s.forEaches[d.ParentStageID]; fe != nil && d.Iteration >= fe.Started {
			for i := fe.Started; i <= d.Iteration; i++ {
				fe.completed[i] = 0
			}
			fe.Started = d.Iteration + 1
		}
		s.bodyDispatched(d)
	}
	if c.Module == workflow.ModuleWait && !d.Skipped {
		s.waits[st.ID] = true
	}
	if c.Module == workflow.ModuleForEach && !d.Skipped {
		st.Status = StageStatusRunning
		s.forEaches[st.ID] = s.expand(c, d)
	}
	s.Stages = append(s.Stages, st)
	s.Pending++
}

// expand reads a FOR_EACH's items from its upstream's output; a value that is not an array
// leaves Items nil, which the scheduler turns into the stage's failure.
func (s *State) expand(c workflow.Component, d Dispatch) *forEach {
	cfg, _ := workflow.ParseForEach(c.Config)
	fe := &forEach{Concurrency: cfg.Concurrency, completed: map[int]int{}, loop: newLoop(cfg)}
	in := s.graph.In[c.ID]
	if len(in) != 1 {
		return fe
	}
	loop, _ := s.Stage(d.ParentStageID)
	out, ok := s.upstreamOutput(in[0], loop, d.Iteration)
	if !ok {
		return fe
	}
	v, _ := workflow.Lookup(out, cfg.Items)
	var items []json.RawMessage
	if json.Unmarshal(v, &items) == nil && items != nil {
		fe.Items = items
	}
	return fe
}

func (s *State) stageAt(component string, iteration int) (Stage, bool) {
	parent := ""
	if iteration != NoIteration {
		parent = StageID(s.ID, s.body[component], NoIteration) // a loop outside any other
	}
	return s.keyed(component, parent, iteration)
}

func (s *State) keyed(component, parent string, iteration int) (Stage, bool) {
	i, ok := s.byKey[stageKey{component, parent, iteration}]
	if !ok {
		return Stage{}, false
	}
	return s.Stages[i], true
}

// change applies f to a stage that is still open.
func (s *State) change(id string, at time.Time, f func(*Stage)) bool {
	i, ok := s.byID[id]
	if !ok || s.Stages[i].Status.Terminal() {
		return false
	}
	st := &s.Stages[i]
	f(st)
	st.UpdatedAt = at
	if st.Status.Terminal() {
		s.Pending--
	}
	return true
}

func (s *State) complete(ev StageCompleted) {
	ok := s.change(ev.StageID, ev.At, func(st *Stage) {
		st.Status, st.Output, st.Error, st.CreditUsage = StageStatusCompleted, ev.Output, nil, ev.CreditUsage
		st.Conditions = ev.Conditions
		st.Attempt = max(st.Attempt, ev.Attempt)
	})
	if !ok {
		return
	}
	s.TotalUsage += ev.CreditUsage
	st := s.Stages[s.byID[ev.StageID]]
	if st.ParentStageID == "" {
		return
	}
	if fe := s.forEaches[st.ParentStageID]; fe != nil {
		if _, open := fe.completed[st.Iteration]; !open {
			return
		}
		fe.completed[st.Iteration]++
		if fe.completed[st.Iteration] == s.bodySize[s.body[st.ComponentID]] {
			fe.Done++
			delete(fe.completed, st.Iteration)
		}
		s.bodyEnded(fe, st.Iteration)
	}
}

func (s *State) finish(ev Finished) {
	s.Status, s.Error = ev.Status, ev.Error
	for i := range s.Stages {
		if !s.Stages[i].Status.Terminal() {
			s.Stages[i].Status, s.Stages[i].Error, s.Stages[i].UpdatedAt = StageStatusFailed, ev.Abort, ev.At
			s.Pending--
		}
	}
}

func eventTime(e domain.Event) time.Time {
	switch ev := e.(type) {
	case Triggered:
		return ev.At
	case StagesDispatched:
		return ev.At
	case StageStarted:
		return ev.At
	case StageCompleted:
		if ev.Then != nil {
			return ev.Then.At
		}
		return ev.At
	case StageFailed:
		return ev.At
	case CancelRequested:
		return ev.At
	case Finished:
		return ev.At
	case Admitted:
		return ev.At
	case StageWaiting:
		return ev.At
	case SignalReceived:
		return ev.At
	}
	return time.Time{}
}

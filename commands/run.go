package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
)

// runAgg folds runs in place (Apply) on a state the fold owns: load clones a cached state before
// evolving it and before handing it out.
var runAgg = aggregate[run.State]{
	evolve: func(s run.State, e domain.Event) run.State { s.Apply(e); return s },
	clone:  func(s run.State) run.State { return s.Clone() },
}

// RunStream is the stream of a workflow run.
func RunStream(id string) string { return eventstore.StreamName(run.Category, id) }

// TriggerWorkflow starts runs of a workflow (SPEC.md 4.5).
type TriggerWorkflow struct {
	WorkspaceID string
	WorkflowID  string
	APIKeyID    string
	// Input is the trigger's output: the request body, an object ({} when empty).
	Input json.RawMessage
	// IdempotencyKey, when set, maps every trigger of the workflow with the same key and
	// BodyHash in 24 hours to the runs of the first (run_trigger_key.go).
	IdempotencyKey string
	BodyHash       string
	// Claim, when set, is the signed request's use-once claim on its signature. A trigger of
	// one run without an Idempotency-Key takes it in the run's commit (one round trip fewer);
	// any other takes it before its first commit (RequestClaim).
	Claim *RequestClaim
}

// TriggeredRun is one entry of the trigger response.
type TriggeredRun struct {
	RunID string `json:"runId"`
	JobID string `json:"jobId"`
}

// TriggerWorkflow starts one run per ON_API_CALLED component, each with a copy of the
// definition as it is now. The workspace's balance must cover one pass over the workflow's
// module components (domain.ErrInsufficientCredits); each stage is charged as it completes.
// A live Idempotency-Key answers the runs it is bound to, with no new run and no balance check.
func (h *Workflows) TriggerWorkflow(ctx context.Context, c TriggerWorkflow) ([]TriggeredRun, error) {
	if err := domain.CheckStorableJSON("body", c.Input); err != nil {
		return nil, err // before any run is written: a refused input leaves nothing behind
	}
	wf, check, err := triggerWorkflow(ctx, h, c, false)
	if err != nil {
		return nil, err
	}
	runs, err := h.trigger(ctx, c, wf, check)
	if staleWorkflow(err, check) {
		// Changed since this process cached it: nothing was written; read it and go again.
		if wf, check, err = triggerWorkflow(ctx, h, c, true); err != nil {
			return nil, err
		}
		return h.trigger(ctx, c, wf, check)
	}
	return runs, err
}

// trigger is TriggerWorkflow of workflow wf, whose runs' commits carry check (triggerWorkflow).
func (h *Workflows) trigger(ctx context.Context, c TriggerWorkflow, wf workflow.State, check eventstore.StreamAppend) ([]TriggeredRun, error) {
	key, err := concurrencyKey(ctx, wf.Definition, c.Input)
	if err != nil {
		return nil, err // before any run or key binding is written
	}
	planned := plannedRuns(wf.Definition)
	if c.IdempotencyKey != "" || len(planned) != 1 {
		// The key's binding, or the first of several runs, is a commit the claim does not
		// ride in: it is taken before it.
		if err := c.Claim.Settle(ctx); err != nil {
			return nil, err
		}
	}
	if bound, found, err := h.keyedRuns(ctx, c); found || err != nil {
		return h.startRuns(ctx, c, wf, key, bound, check, err)
	}
	if err := h.checkBalance(ctx, c.WorkspaceID, passCost(h.catalog.price(ctx, c.WorkspaceID), wf.Definition)); err != nil {
		return nil, err
	}
	if c.IdempotencyKey != "" {
		planned, err = h.bindTriggerKey(ctx, c, planned)
	}
	return h.startRuns(ctx, c, wf, key, planned, check, err)
}

// plannedRuns gives each ON_API_CALLED component of d a new run.
func plannedRuns(d workflow.Definition) []run.KeyedRun {
	var out []run.KeyedRun
	for _, comp := range d.Components {
		if comp.Module == workflow.ModuleTrigger {
			id := newID().String()
			out = append(out, run.KeyedRun{RunID: id, JobID: run.StageID(id, comp.ID, run.NoIteration), TriggerID: comp.ID})
		}
	}
	return out
}

// startRuns appends the trigger of each run that does not exist yet: a run a keyed trigger
// bound but did not start (it stopped between the two) is started by the next one. Each run's
// commit carries check (triggerWorkflow).
func (h *Workflows) startRuns(ctx context.Context, c TriggerWorkflow, wf workflow.State, key string, runs []run.KeyedRun, check eventstore.StreamAppend, err error) ([]TriggeredRun, error) {
	if err != nil {
		return nil, err
	}
	out := []TriggeredRun{}
	for _, r := range runs {
		comp := r.TriggerID
		if h.announce != nil {
			h.announce(r.RunID)
		}
		st, dispatched, err := triggerRunStepped(ctx, h, r.RunID, true, c.Claim, check, func(s run.State) ([]domain.Event, error) {
			return run.DecideTrigger(s, r.RunID, c.WorkspaceID, wf.ID, c.APIKeyID, comp, wf.Definition, c.Input, key, edgeCondition(ctx), h.now())
		})
		if err != nil && !errors.Is(err, domain.ErrAlreadyExists) {
			return out, wrap("trigger workflow", err)
		}
		if err == nil && h.wake != nil {
			h.wake(st, dispatched)
		}
		out = append(out, TriggeredRun{RunID: r.RunID, JobID: r.JobID})
	}
	return out, nil
}

// passCost is what running every module component of d once costs, at price's prices.
func passCost(price func(module string) int64, d workflow.Definition) int64 {
	var total int64
	for _, c := range d.Components {
		total += price(c.Module)
	}
	return total
}

// Run folds a run from the event store; an unknown id is domain.ErrNotFound.
func (h *Workflows) Run(ctx context.Context, id string) (run.State, error) {
	if _, err := uuid.Parse(id); err != nil {
		return run.State{}, fmt.Errorf("run %q: %w", id, domain.ErrNotFound)
	}
	l, err := load(ctx, h, RunStream(id), runAgg)
	if err != nil {
		return run.State{}, err
	}
	if !l.state.Exists {
		return run.State{}, fmt.Errorf("run %s: %w", id, domain.ErrNotFound)
	}
	return l.state, nil
}

// CancelRun ends a run FAILED with its cancellation recorded (SPEC.md 3); a finished run is
// domain.ErrConflict.
func (h *Workflows) CancelRun(ctx context.Context, id, reason string) (run.State, error) {
	if _, err := h.Run(ctx, id); err != nil {
		return run.State{}, err
	}
	st, _, err := executeFold(ctx, h, RunStream(id), runAgg, func(s run.State) ([]domain.Event, error) {
		return run.DecideCancel(s, reason, h.now())
	})
	return st, err
}

// StepRun records what happened to a run's stage executions and advances the run: it returns
// the run after the step and the module stages newly dispatched, whose executions the caller
// submits with SubmitStage.
func (h *Workflows) StepRun(ctx context.Context, id string, facts []run.Fact) (run.State, []run.Stage, error) {
	var dispatched []run.Stage
	st, _, err := executeCached(ctx, h, RunStream(id), runAgg, func(s run.State) ([]domain.Event, error) {
		var events []domain.Event
		events, dispatched = run.StepWith(s, facts, runEval(ctx), h.now())
		return events, nil
	})
	if err != nil {
		return st, nil, wrap("step run "+id, err)
	}
	return st, dispatched, nil
}

// SubmitStage submits the execution of a dispatched module stage. It is idempotent: the
// execution's id is derived from the stage, and one that exists already is left alone.
func (h *Workflows) SubmitStage(ctx context.Context, r *run.State, st run.Stage) error {
	if st.ChildRunID != "" {
		return startChild(ctx, h, r, st)
	}
	comp := r.Component(st)
	// A module deleted since the workflow was saved resolves to nothing: the stage's attempts
	// then fail as a call of an unknown module does.
	use, err := h.catalog.use(ctx, r.WorkspaceID, comp.Module)
	if err != nil && !errors.Is(err, domain.ErrInvalid) {
		return wrap("submit stage "+st.ID, err)
	}
	sub := execution.Submit{ExecutionID: st.ExecutionID, WorkspaceID: r.WorkspaceID, APIKeyID: r.APIKeyID,
		Module: comp.Module, Input: r.StageInput(st), Config: comp.Config, Attempts: comp.Attempts, CostMilli: use.costMilli,
		RunID: r.ID, StageID: st.ID, Retry: comp.Retry, TimeoutMs: use.stageTimeout(comp.TimeoutMs), Transport: use.transport}
	_, err = execute(ctx, h, ExecutionStream(st.ExecutionID), executionAgg, func(s execution.State) ([]domain.Event, error) {
		return execution.DecideSubmit(s, sub, h.now())
	})
	if errors.Is(err, domain.ErrAlreadyExists) {
		return nil
	}
	return wrap("submit stage "+st.ID, err)
}

// edgeCondition evaluates edges' conditions for the run decisions, which record the answers in
// their events (run.Condition says why the domain does not evaluate them itself). A condition
// that fails at run time (say, null compared with a number) or runs past its deadline is
// false: the edge is not taken.
func edgeCondition(ctx context.Context) run.Condition {
	return func(e workflow.Edge, output, trigger json.RawMessage) bool {
		c, err := compiledConditions.get(e.When)
		if err != nil {
			return false // validated when the workflow was saved: cannot happen for a stored one
		}
		ok, err := c.Eval(ctx, output, trigger)
		return err == nil && ok
	}
}

// conditionCache holds compiled conditions by source: a condition is compiled once per
// process, not once per stage.
type conditionCache struct {
	mu sync.Mutex
	m  map[string]*modules.Condition
}

// maxCachedConditions bounds the cache; a full cache starts over.
const maxCachedConditions = 4096

var compiledConditions = conditionCache{m: map[string]*modules.Condition{}}

func (c *conditionCache) get(src string) (*modules.Condition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[src]; ok {
		return p, nil
	}
	p, err := modules.CompileCondition(src)
	if err != nil {
		return nil, err
	}
	if len(c.m) >= maxCachedConditions {
		clear(c.m)
	}
	c.m[src] = p
	return p, nil
}

// EndedRun is the run id as this process's state cache holds it, with the revision it was
// folded to, when that state has ended: what the scheduler's step just wrote. A run's status
// never moves once terminal, so whoever folds the run to that revision finds the same state:
// its streams may send it without reading the run back (serve's scheduler.Config.Ended).
// false: not cached, or not ended as cached.
func EndedRun(w *Workflows, id string) (run.State, uint64, bool) {
	st, rev, ok := CachedRun(w, id)
	if !ok || !st.Status.Terminal() {
		return run.State{}, 0, false
	}
	return st, rev, true
}

// CachedRun is the run id as this process's state cache holds it (a copy), with the revision
// it was folded to; false when the cache has no such run. The state may be behind the store:
// who uses it must know from elsewhere that it is not (the live hub's Delivered, say).
func CachedRun(w *Workflows, id string) (run.State, uint64, bool) {
	cur, _, shared := cachedState(w, RunStream(id), runAgg)
	if !shared || !cur.exists {
		return run.State{}, 0, false
	}
	return cur.state.Clone(), cur.revision, true
}

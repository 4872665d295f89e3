package commands

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
)

// RerunRun starts a new run of an ended run's copied definition (run.DecideRerun).
type RerunRun struct {
	RunID    string
	APIKeyID string
	// FromStage, when set, is the component the re-run restarts at; Input, when set, replaces
	// the trigger body.
	FromStage string
	Input     json.RawMessage
	// Iteration, when set, restarts only that iteration of FromStage, a FOR_EACH.
	Iteration *int
	// NewRunID, when set, is the new run's id (a bulk's, derived so that acting again finds
	// it: domain.ErrAlreadyExists); otherwise a new one.
	NewRunID string
}

// RerunRun starts a re-run of an ended run, copying the stages completed upstream of its
// restart point (run.DecideRerun). The workspace's balance must cover one pass over the stages
// that run again (rerunCost); an unknown fromStage is domain.ErrInvalid and a run not ended
// domain.ErrConflict.
func (h *Workflows) RerunRun(ctx context.Context, c RerunRun) (TriggeredRun, error) {
	if err := domain.CheckStorableJSON("input", c.Input); err != nil {
		return TriggeredRun{}, err
	}
	orig, err := h.Run(ctx, c.RunID)
	if err != nil {
		return TriggeredRun{}, err
	}
	r := run.Rerun{FromStage: c.FromStage, Input: c.Input, Iteration: c.Iteration, ConcurrencyKey: orig.ConcurrencyKey}
	if len(c.Input) > 0 {
		if r.ConcurrencyKey, err = concurrencyKey(ctx, orig.Definition, c.Input); err != nil {
			return TriggeredRun{}, err
		}
	}
	id := c.NewRunID
	if id == "" {
		id = newID().String()
	}
	planned, err := run.DecideRerun(orig, id, c.APIKeyID, r, nil, h.now())
	if err != nil {
		return TriggeredRun{}, wrap("re-run "+c.RunID, err) // before the balance: a refused re-run is not a 402
	}
	if err := h.checkBalance(ctx, orig.WorkspaceID, rerunCost(h.catalog.price(ctx, orig.WorkspaceID), planned[0].(run.Triggered))); err != nil {
		return TriggeredRun{}, err
	}
	st, err := triggerRun(ctx, h, id, func(s run.State) ([]domain.Event, error) {
		if s.Exists {
			return nil, domain.ErrAlreadyExists
		}
		return run.DecideRerun(orig, id, c.APIKeyID, r, edgeCondition(ctx), h.now())
	})
	if err != nil {
		return TriggeredRun{}, wrap("re-run "+c.RunID, err)
	}
	return TriggeredRun{RunID: st.ID, JobID: st.JobID()}, nil
}

// rerunCost is a trigger's balance check for what a re-run runs: one pass over the module
// components it does not copy whole (a loop's component counts once, as in passCost).
func rerunCost(price func(module string) int64, ev run.Triggered) int64 {
	copied := map[string]bool{}
	for _, r := range ev.Reused {
		if r.Loop == "" {
			copied[r.ComponentID] = true
		}
	}
	def := ev.Definition
	def.Components = slices.DeleteFunc(slices.Clone(def.Components), func(c workflow.Component) bool { return copied[c.ID] })
	return passCost(price, def)
}

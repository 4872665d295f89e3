package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/bulk"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/eventstore"
)

var bulkAgg = aggregate[bulk.State]{evolve: bulk.State.Evolve}

// BulkStream is the stream of a bulk action.
func BulkStream(id string) string { return eventstore.StreamName(bulk.Category, id) }

// bulkBatch is how many runs AdvanceBulk acts on and marks at a time, and bulkConcurrency how
// many of them at once: a crash loses at most a batch's marks, which acting again recovers.
const (
	bulkBatch       = 50
	bulkConcurrency = 8
)

// RunMatcher finds the runs a bulk's filter selects: the runs read model
// (projections.Queries), which commands does not import.
type RunMatcher interface {
	MatchRuns(ctx context.Context, m bulk.Match) ([]string, error)
}

// StartBulk asks for a bulk action on runs of a workflow; Runs matches them.
type StartBulk struct {
	WorkspaceID string
	WorkflowID  string
	APIKeyID    string
	Action      bulk.Action
	Filter      bulk.Filter
	Reason      string
	Runs        RunMatcher
}

// StartBulk records a new bulk action on the runs its filter matches now (at most
// bulk.MaxRuns: more is domain.ErrInvalid naming the filter); AdvanceBulk (the bulks
// reactor's) carries it out. An unknown workflow is domain.ErrNotFound.
func (h *Bulks) StartBulk(ctx context.Context, c StartBulk) (bulk.State, error) {
	if err := bulk.Check(c.Action, c.Filter, c.Reason); err != nil {
		return bulk.State{}, err
	}
	if _, err := h.workflows.Workflow(ctx, c.WorkspaceID, c.WorkflowID); err != nil {
		return bulk.State{}, err
	}
	ids, err := c.Runs.MatchRuns(ctx, bulk.MatchOf(c.WorkspaceID, c.WorkflowID, c.Action, c.Filter))
	if err != nil {
		return bulk.State{}, wrap("start bulk", err)
	}
	r := bulk.Request{BulkID: uuid.NewString(), WorkspaceID: c.WorkspaceID, WorkflowID: c.WorkflowID, APIKeyID: c.APIKeyID,
		Action: c.Action, Filter: c.Filter, Reason: c.Reason, RunIDs: ids}
	st, _, err := executeFold(ctx, h, BulkStream(r.BulkID), bulkAgg, func(s bulk.State) ([]domain.Event, error) {
		return bulk.DecideRequest(s, r, h.now())
	})
	return st, wrap("start bulk", err)
}

// Bulk folds a bulk from the event store; an unknown id is domain.ErrNotFound.
func (h *Bulks) Bulk(ctx context.Context, id string) (bulk.State, error) {
	if _, err := uuid.Parse(id); err != nil {
		return bulk.State{}, fmt.Errorf("bulk %q: %w", id, domain.ErrNotFound)
	}
	l, err := load(ctx, h, BulkStream(id), bulkAgg)
	if err != nil {
		return bulk.State{}, err
	}
	if !l.state.Exists {
		return bulk.State{}, fmt.Errorf("bulk %s: %w", id, domain.ErrNotFound)
	}
	return l.state, nil
}

// AdvanceBulk acts on the bulk's next batch of unmarked runs and marks them, returning the
// bulk after: the caller calls again until it is COMPLETED. What cannot be done to a run (it
// ended meanwhile, the balance does not cover its re-run) marks it failed; an error of the
// store leaves the batch unmarked, to be acted on again, which finds what was done already.
func (h *Bulks) AdvanceBulk(ctx context.Context, id string) (bulk.State, error) {
	l, err := load(ctx, h, BulkStream(id), bulkAgg)
	if err != nil {
		return bulk.State{}, err
	}
	s := l.state
	next := s.Next(bulkBatch)
	if len(next) == 0 {
		return s, nil
	}
	results := make([]bulk.Result, len(next))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bulkConcurrency)
	for i, runID := range next {
		g.Go(func() error {
			var err error
			results[i], err = h.act(gctx, s, runID)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return s, wrap("bulk "+id, err)
	}
	st, _, err := executeFrom(ctx, h, BulkStream(id), bulkAgg, &l, func(s bulk.State) ([]domain.Event, error) {
		return bulk.DecideProgress(s, results, h.now())
	})
	return st, wrap("bulk "+id, err)
}

// act does the bulk's action to one run. It returns an error only for what acting again may
// cure (the store); the rest is the run's result.
func (h *Bulks) act(ctx context.Context, b bulk.State, runID string) (bulk.Result, error) {
	res := bulk.Result{RunID: runID}
	r, err := h.workflows.Run(ctx, runID)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && (r.WorkspaceID != b.WorkspaceID || r.WorkflowID != b.WorkflowID)) {
		res.Error = "run not found in this workflow"
		return res, nil
	}
	if err != nil {
		return res, err
	}
	switch b.Action {
	case bulk.ActionCancel:
		err = h.cancel(ctx, b, r)
	case bulk.ActionRerun:
		res.NewRunID, err = h.rerun(ctx, b, runID)
	}
	if err == nil {
		return res, nil
	}
	if errors.Is(err, domain.ErrConflict) || errors.Is(err, domain.ErrInvalid) || errors.Is(err, domain.ErrInsufficientCredits) {
		res.NewRunID, res.Error = "", outcomeText(err)
		return res, nil
	}
	return res, err
}

// cancel cancels run r. A run that ended is a conflict, unless its cancel came after the bulk
// began: this bulk's own, acted on before a crash left it unmarked (or another's meanwhile,
// which did what was asked just the same).
func (h *Bulks) cancel(ctx context.Context, b bulk.State, r run.State) error {
	if r.Status.Terminal() && !r.CancelAt.IsZero() && !r.CancelAt.Before(b.CreatedAt) {
		return nil
	}
	_, err := h.workflows.CancelRun(ctx, r.ID, b.Reason)
	return err
}

// rerun re-runs run runID as a run whose id is derived from the bulk and the run, so a re-run
// already started (before a crash) is found, not started again.
func (h *Bulks) rerun(ctx context.Context, b bulk.State, runID string) (string, error) {
	id := bulk.RerunID(b.ID, runID)
	if _, err := h.workflows.Run(ctx, id); err == nil {
		return id, nil // started before a crash: checked first, as the balance may have moved since
	} else if !errors.Is(err, domain.ErrNotFound) {
		return "", err
	}
	out, err := h.workflows.RerunRun(ctx, RerunRun{RunID: runID, APIKeyID: b.APIKeyID, NewRunID: id})
	if errors.Is(err, domain.ErrAlreadyExists) {
		return id, nil
	}
	return out.RunID, err
}

// outcomeText is the error of a run's result: the domain's message, without the operations
// wrapped around it.
func outcomeText(err error) string {
	var v *domain.ValidationError
	var c *domain.ConflictError
	switch {
	case errors.As(err, &v):
		return v.Error()
	case errors.As(err, &c):
		return c.Message
	case errors.Is(err, domain.ErrInsufficientCredits):
		return "insufficient credits for the re-run"
	}
	return err.Error()
}

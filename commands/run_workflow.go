package commands

import (
	"context"
	"errors"

	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
)

// triggerWorkflow is the workflow a trigger starts a run of, and the check its run's commit
// carries. A trigger of one run without an Idempotency-Key takes the workflow as this process
// cached it, without a read, and its commit checks that the workflow's stream is still at that
// revision (a part without events, which the store holds until the commit): a definition
// changed meanwhile, by this instance or another, refuses the commit and the trigger reads it
// (staleWorkflow). That read was one round trip and one transaction of every trigger's. Any
// other trigger, or one with fresh, reads the workflow first and carries no check: it starts
// the definition as it was when read, as every trigger did before. So does every trigger on a
// store whose AppendMulti is not one commit (one that takes no claims, KurrentDB): a check
// failing there would leave the parts before it written.
func triggerWorkflow(ctx context.Context, h *Workflows, c TriggerWorkflow, fresh bool) (workflow.State, eventstore.StreamAppend, error) {
	stream := WorkflowStream(c.WorkflowID)
	if !fresh && c.IdempotencyKey == "" && h.takesClaims() {
		l, _, cached := cachedState(h, stream, workflowAgg)
		if cached && l.exists && l.state.Live() && l.state.WorkspaceID == c.WorkspaceID && apiTriggers(l.state.Definition) == 1 {
			return l.state, eventstore.StreamAppend{Stream: stream, Expected: eventstore.Exact(l.revision)}, nil
		}
	}
	wf, err := h.Workflow(ctx, c.WorkspaceID, c.WorkflowID)
	return wf, eventstore.StreamAppend{}, err
}

// staleWorkflow reports whether err is check's refusal: the workflow moved on since the
// trigger took it from the cache.
func staleWorkflow(err error, check eventstore.StreamAppend) bool {
	var wrong *eventstore.WrongExpectedVersionError
	return check.Stream != "" && errors.As(err, &wrong) && wrong.Stream == check.Stream
}

// apiTriggers counts d's ON_API_CALLED components: the runs a trigger of d starts.
func apiTriggers(d workflow.Definition) int {
	n := 0
	for _, c := range d.Components {
		if c.Module == workflow.ModuleTrigger {
			n++
		}
	}
	return n
}

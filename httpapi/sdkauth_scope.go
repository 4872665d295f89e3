package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
)

// What a scoped key (SPEC.md 5 rule 2: a non-empty allowedWorkflowIds) may do, decided here
// and in Caller.MayReadExecution (docs/authentication.md, "Scoped keys"): trigger, read,
// stream and cancel runs of its workflows and update their components (the workflow handlers
// check Caller.AllowsWorkflow), read the executions of those runs' stages and any it submitted
// itself, and list modules and its workflows. It may not run a standalone component, nor read
// any other execution of its workspace. An unrestricted key may do everything.
type keyAccess int

const (
	// anyKey routes answer every key; their handlers filter what a scoped key sees.
	anyKey keyAccess = iota
	// unscopedOnly routes refuse scoped keys: a standalone component is no workflow's.
	unscopedOnly
	// forExecution routes name an {executionId} that a scoped key may read only if
	// Caller.MayReadExecution says so.
	forExecution
)

// UnscopedOnly marks a route that scoped keys may not call.
func UnscopedOnly(s *routeSpec) { s.access = unscopedOnly }

// ForExecution marks a route of the execution in its {executionId} variable.
func ForExecution(s *routeSpec) { s.access = forExecution }

// ExecutionOwner is who an execution belongs to: its workspace, the key that submitted it,
// and the workflow whose run it is a stage of ("" for a standalone execution).
type ExecutionOwner struct {
	WorkspaceID, APIKeyID, WorkflowID string
}

// MayReadExecution reports whether the key may read (get, stream, replay) an execution of its
// workspace: an unrestricted key any, a scoped key the stages of its workflows' runs and what
// it submitted itself.
func (c Caller) MayReadExecution(o ExecutionOwner) bool {
	if len(c.AllowedWorkflowIDs) == 0 || o.APIKeyID == c.KeyID {
		return true
	}
	return o.WorkflowID != "" && c.AllowsWorkflow(o.WorkflowID)
}

// ExecutionOwnerFrom reads an execution's owner through the command handler: the execution,
// then, for a run stage, its run.
func ExecutionOwnerFrom(cmds *commands.Commands) func(ctx context.Context, executionID string) (ExecutionOwner, error) {
	return func(ctx context.Context, id string) (ExecutionOwner, error) {
		st, err := cmds.Executions.Execution(ctx, id)
		if err != nil {
			return ExecutionOwner{}, err
		}
		o := ExecutionOwner{WorkspaceID: st.WorkspaceID, APIKeyID: st.APIKeyID}
		if st.RunID == "" {
			return o, nil
		}
		run, err := cmds.Workflows.Run(ctx, st.RunID)
		if err != nil {
			return ExecutionOwner{}, fmt.Errorf("run %s of execution %s: %w", st.RunID, id, err)
		}
		o.WorkflowID = run.WorkflowID
		return o, nil
	}
}

// permitted applies the route's access to the caller; on refusal it has answered. Only scoped
// keys pay for the owner lookup. An execution of another workspace is left to the handler,
// which answers 404 for it as for an unknown one.
func (a *SDKAuth) permitted(w http.ResponseWriter, r *http.Request, c Caller, acc keyAccess) bool {
	if len(c.AllowedWorkflowIDs) == 0 || acc == anyKey {
		return true
	}
	if acc == unscopedOnly {
		WriteError(w, http.StatusForbidden, "this API key is limited to its allowedWorkflowIds; running a standalone component needs an unrestricted key")
		return false
	}
	id := mux.Vars(r)["executionId"]
	if a.opts.ExecutionOwner == nil {
		WriteError(w, http.StatusForbidden, "this API key is limited to its allowedWorkflowIds and may not read execution "+id)
		return false
	}
	o, err := a.opts.ExecutionOwner(r.Context(), id)
	if errors.Is(err, domain.ErrNotFound) {
		// Answered here rather than left to the handler: an execution created in between
		// would otherwise pass unchecked.
		WriteError(w, http.StatusNotFound, "execution "+id+" not found")
		return false
	}
	if err != nil {
		WriteDomainError(w, r, fmt.Errorf("sdk auth: owner of execution %s: %w", id, err))
		return false
	}
	if o.WorkspaceID != c.WorkspaceID || c.MayReadExecution(o) {
		return true
	}
	WriteError(w, http.StatusForbidden, "this API key is limited to its allowedWorkflowIds and may not read execution "+id)
	return false
}

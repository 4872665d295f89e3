package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/bulk"
)

// BulkRequest is the body of POST /v1/sdk/workflows/:workflowId/runs/bulk, as the edge reads
// it: pointers, so a missing field is told from an empty one.
type BulkRequest struct {
	Action *string            `json:"action"`
	Filter *BulkFilterRequest `json:"filter"`
	Reason *string            `json:"reason"`
}

// BulkFilterRequest is a bulk's filter as the edge reads it.
type BulkFilterRequest struct {
	Status        *string `json:"status"`
	CreatedAfter  *string `json:"createdAfter"`
	CreatedBefore *string `json:"createdBefore"`
}

// BulkAccepted is the 202 answer of a bulk action.
type BulkAccepted struct {
	BulkID  string `json:"bulkId"`
	Matched int    `json:"matched"`
}

// ParseBulk turns a bulk's body into the command (without the workspace and key), naming the
// field of a malformed value.
func ParseBulk(body BulkRequest) (commands.StartBulk, error) {
	var c commands.StartBulk
	if body.Action == nil {
		return c, domain.Invalid("action", "is required: %q or %q", bulk.ActionCancel, bulk.ActionRerun)
	}
	c.Action = bulk.Action(*body.Action)
	if body.Reason != nil {
		c.Reason = strings.TrimSpace(*body.Reason)
	}
	if f := body.Filter; f != nil {
		if f.Status != nil {
			c.Filter.Status = *f.Status
		}
		var err error
		if c.Filter.CreatedAfter, err = parseBulkTime("filter.createdAfter", f.CreatedAfter); err != nil {
			return c, err
		}
		if c.Filter.CreatedBefore, err = parseBulkTime("filter.createdBefore", f.CreatedBefore); err != nil {
			return c, err
		}
	}
	return c, bulk.Check(c.Action, c.Filter, c.Reason)
}

func parseBulkTime(field string, v *string) (*time.Time, error) {
	if v == nil || *v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		return nil, domain.Invalid(field, "must be an ISO 8601 timestamp such as 2026-01-02T15:04:05Z")
	}
	t = t.UTC()
	return &t, nil
}

// bulk starts a bulk action on runs of the route's workflow (docs/workflows.md, "Bulk
// actions").
func (s *SDKWorkflows) bulk(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["workflowId"]
	if !allowed(w, caller, id) {
		return
	}
	var body BulkRequest
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	c, err := ParseBulk(body)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	c.WorkspaceID, c.WorkflowID, c.APIKeyID, c.Runs = caller.WorkspaceID, id, caller.KeyID, s.Queries
	st, err := s.Cmds.Bulks.StartBulk(r.Context(), c)
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "workflow "+id+" not found")
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusAccepted, BulkAccepted{BulkID: st.ID, Matched: len(st.RunIDs)})
}

// getBulk shows a bulk's progress; another workspace's answers 404, as an unknown one does.
func (s *SDKWorkflows) getBulk(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["bulkId"]
	st, err := s.Cmds.Bulks.Bulk(r.Context(), id)
	if err == nil && st.WorkspaceID != caller.WorkspaceID {
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "bulk "+id+" not found")
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	if allowed(w, caller, st.WorkflowID) {
		WriteJSON(w, http.StatusOK, st.Detail())
	}
}

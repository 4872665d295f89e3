package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/web/httperr"
)

// completion is one outcome of a POST /v1/sdk/tasks/complete.
type completion struct {
	TaskID string          `json:"taskId"`
	Output json.RawMessage `json:"output"`
}

// completionResult is what one completion came to: the execution's status after it, or the
// error (the SPEC.md 7 body) the task's own complete would have answered.
type completionResult struct {
	TaskID string        `json:"taskId"`
	Status string        `json:"status,omitempty"`
	Error  *httperr.Body `json:"error,omitempty"`
}

// completeMany records the outputs of several tasks in one request, so that a busy worker
// sends one signed request for the tasks it finished together instead of one each. Each
// completion is decided as POST /v1/sdk/tasks/{taskId}/complete decides it, and they run at
// once: the executor's charger writes those that meet in one commit. The answer is 200 with a
// result per completion, in order; a body that cannot be read is 400 and records nothing.
func (s *SDKTasks) completeMany(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	fields, err := taskFields(r, "tasks")
	if err != nil {
		writeTaskError(w, r, err)
		return
	}
	items, err := parseCompletions(fields)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	results := make([]completionResult, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		tc := taskCaller(caller)
		if i == 0 {
			// The request's signature is taken in the first completion's commit; when that
			// one records nothing, the middleware takes it afterwards.
			tc.Claim = requestClaimFrom(r.Context())
		}
		wg.Go(func() {
			results[i] = completionResult{TaskID: it.TaskID}
			st, err := s.Tasks.CompleteTask(r.Context(), tc, it.TaskID, it.Output)
			if err != nil {
				results[i].Error = s.itemError(r, err, fmt.Sprintf("tasks[%d].", i))
				return
			}
			results[i].Status = string(st.Status)
		})
	}
	wg.Wait()
	for _, res := range results {
		if res.Error != nil && res.Error.StatusCode == http.StatusUnauthorized {
			// The first completion found the request's signature used: a replay, refused as
			// the middleware refuses one.
			WriteError(w, http.StatusUnauthorized, MsgInvalidSignature)
			return
		}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"results": results})
}

// itemError is the body one completion's error would have answered on its own route; an
// unexpected error is logged and shown as a 500 without detail. A field a validation error
// names is prefixed with the completion's place (tasks[2].output.n).
func (s *SDKTasks) itemError(r *http.Request, err error, prefix string) *httperr.Body {
	status, msg, ok := httperr.Classify(err)
	if !ok {
		LoggerFrom(r.Context()).WithError(err).Error("task completion failed")
	}
	if ve := (*domain.ValidationError)(nil); errors.As(err, &ve) {
		msg = prefix + msg
	}
	return &httperr.Body{Message: msg, StatusCode: status, Error: http.StatusText(status)}
}

// parseCompletions reads tasks: 1 to maxCompletions of {taskId, output}, each task once.
func parseCompletions(fields map[string]json.RawMessage) ([]completion, error) {
	raw, ok := fields["tasks"]
	if !ok || isNull(raw) {
		return nil, domain.Invalid("tasks", "is required")
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 || len(list) > maxCompletions {
		return nil, domain.Invalid("tasks", "must be a list of 1 to %d objects {taskId, output}", maxCompletions)
	}
	items := make([]completion, len(list))
	seen := make(map[string]bool, len(list))
	for i, f := range list {
		at := fmt.Sprintf("tasks[%d]", i)
		if f == nil {
			return nil, domain.Invalid(at, "must be an object {taskId, output}")
		}
		for name := range f {
			if name != "taskId" && name != "output" {
				return nil, domain.Invalid(at+"."+name, "is not a field of a completion")
			}
		}
		id, err := requiredString(f, "taskId")
		if err != nil || len(id) > 200 {
			return nil, domain.Invalid(at+".taskId", "is required: a task id of at most 200 characters")
		}
		if seen[id] {
			return nil, domain.Invalid(at+".taskId", "names a task an earlier completion of this request names")
		}
		seen[id] = true
		items[i] = completion{TaskID: id, Output: f["output"]}
	}
	return items, nil
}

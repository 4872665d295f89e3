package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/reactors/livehub"
)

// SDKWorkflows serves SPEC.md 4.5 to 4.8: triggering runs, reading, streaming and cancelling
// them, and updating a workflow's components, with a workspace API key.
type SDKWorkflows struct {
	Cmds    *commands.Commands
	Queries *projections.Queries
	Hub     *livehub.Hub
	Auth    *SDKAuth
	// Heartbeat is the interval of :ping comments on run streams (15s).
	Heartbeat time.Duration
	// InPlaceFor is how long an HTTP/1 stream is served in place before its connection is
	// taken over; 0, the default, takes it over at once (see serveSSE).
	InPlaceFor time.Duration
}

// Mount adds the routes to the /v1 router.
func (s *SDKWorkflows) Mount(v1 *mux.Router) {
	v1.Handle("/sdk/workflows", s.Auth.Route(1, http.HandlerFunc(s.list))).Methods(http.MethodGet)
	v1.Handle("/sdk/workflows/executions/{runId}", s.Auth.Route(1, http.HandlerFunc(s.get))).Methods(http.MethodGet)
	v1.Handle("/sdk/workflows/executions/{runId}/stream", s.Auth.Route(1, http.HandlerFunc(s.stream), Stream)).Methods(http.MethodGet)
	v1.Handle("/sdk/workflows/executions/{runId}/cancel", s.Auth.Route(1, http.HandlerFunc(s.cancel))).Methods(http.MethodPost)
	v1.Handle("/sdk/workflows/executions/{runId}/signals", s.Auth.Route(1, http.HandlerFunc(s.signal))).Methods(http.MethodPost)
	v1.Handle("/sdk/workflows/executions/{runId}/rerun", s.Auth.Route(1, http.HandlerFunc(s.rerun))).Methods(http.MethodPost)
	v1.Handle("/sdk/workflows/executions/{runId}/replay-callback", s.Auth.Route(1, http.HandlerFunc(s.replayNotify))).Methods(http.MethodPost)
	v1.Handle("/sdk/workflows/bulk/{bulkId}", s.Auth.Route(1, http.HandlerFunc(s.getBulk))).Methods(http.MethodGet)
	v1.Handle("/sdk/workflows/{workflowId}", s.Auth.Route(1, http.HandlerFunc(s.trigger), ClaimInCommit)).Methods(http.MethodPost)
	v1.Handle("/sdk/workflows/{workflowId}/runs/bulk", s.Auth.Route(1, http.HandlerFunc(s.bulk))).Methods(http.MethodPost)
	v1.Handle("/sdk/workflows/{workflowId}/components/{componentId}", s.Auth.Route(1, http.HandlerFunc(s.updateComponent))).Methods(http.MethodPost)
	s.mountSchedules(v1)
}

func (s *SDKWorkflows) list(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	ServePage(w, r, func(ctx context.Context, p projections.Page) ([]projections.WorkflowListItem, int, error) {
		return s.Queries.WorkflowsIn(ctx, caller.WorkspaceID, caller.AllowedWorkflowIDs, p)
	})
}

// allowed answers 403 when the key is scoped to other workflows (SPEC.md 5 rule 2).
func allowed(w http.ResponseWriter, caller Caller, workflowID string) bool {
	if caller.AllowsWorkflow(workflowID) {
		return true
	}
	WriteError(w, http.StatusForbidden, "this API key is not allowed to use workflow "+workflowID)
	return false
}

func (s *SDKWorkflows) trigger(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["workflowId"]
	if !allowed(w, caller, id) {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	input := json.RawMessage(`{}`)
	if len(bytes.TrimSpace(body)) > 0 {
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil || obj == nil {
			WriteError(w, http.StatusBadRequest, "body: must be a JSON object (the trigger's input) or empty")
			return
		}
		input = body
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey {
		WriteError(w, http.StatusBadRequest, "Idempotency-Key: must be at most 255 characters")
		return
	}
	sum := sha256.Sum256(body)
	runs, err := s.Cmds.Workflows.TriggerWorkflow(r.Context(), commands.TriggerWorkflow{WorkspaceID: caller.WorkspaceID,
		WorkflowID: id, APIKeyID: caller.KeyID, Input: input, IdempotencyKey: key, BodyHash: hex.EncodeToString(sum[:]),
		Claim: requestClaimFrom(r.Context())}) // taken in the run's commit
	if errors.Is(err, run.ErrTriggerKeyReused) {
		WriteError(w, http.StatusConflict, "Idempotency-Key was already used with a different workflow or request body")
		return
	}
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "workflow "+id+" not found")
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, runs)
}

// loadRun finds the route's run; another workspace's answers 404, as an unknown one does,
// and a run of a workflow the key may not use answers 403.
func (s *SDKWorkflows) loadRun(w http.ResponseWriter, r *http.Request) (run.State, bool) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["runId"]
	st, err := s.Cmds.Workflows.Run(r.Context(), id)
	if err == nil && st.WorkspaceID != caller.WorkspaceID {
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "run "+id+" not found")
		return st, false
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return st, false
	}
	return st, allowed(w, caller, st.WorkflowID)
}

func (s *SDKWorkflows) get(w http.ResponseWriter, r *http.Request) {
	if st, ok := s.loadRun(w, r); ok {
		WriteJSON(w, http.StatusOK, s.Cmds.Waits.RunDetail(&st))
	}
}

func (s *SDKWorkflows) cancel(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Reason *string `json:"reason"`
	}
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	reason := ""
	if body.Reason != nil {
		reason = strings.TrimSpace(*body.Reason)
	}
	if len(reason) > run.MaxReasonLength {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("reason: must be at most %d characters", run.MaxReasonLength))
		return
	}
	st, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	after, err := s.Cmds.Workflows.CancelRun(r.Context(), st.ID, reason)
	if errors.Is(err, domain.ErrConflict) {
		WriteError(w, http.StatusConflict, fmt.Sprintf("run %s has already finished (%s); only a running run can be cancelled", st.ID, st.Status))
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, after.Detail())
}

// decodeOptionalBody decodes a JSON object body with known fields only; an empty body is
// fine. It answers the 400 itself.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeBodyError(w, err)
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		WriteError(w, http.StatusBadRequest, "body: "+jsonProblem(err))
		return false
	}
	if err := domain.CheckJSONBody("body", body); err != nil {
		WriteDomainError(w, r, err)
		return false
	}
	return true
}

// jsonProblem words a decoding error so that it names the field at fault.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		want := jsonKind(te.Type.Kind().String())
		if n, ok := strings.CutPrefix(te.Value, "number "); ok && want == "number" {
			// A number the field's type cannot hold: too large, or a fraction for a count.
			return fmt.Sprintf("%s: %.40s is out of range", te.Field, n)
		}
		return fmt.Sprintf("%s: must be %s, not %s", te.Field, withArticle(want), te.Value)
	}
	if errors.Is(err, workflow.ErrPosition) {
		return err.Error()
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return strings.Trim(f, `"`) + ": is not a field of this request"
	}
	return "must be a JSON object: " + msg
}

func jsonKind(k string) string {
	switch k {
	case "float64", "int", "int64":
		return "number"
	case "slice", "array":
		return "array"
	case "map", "struct":
		return "object"
	}
	return k
}

func withArticle(s string) string {
	if strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// componentUpdate is the body of SPEC.md 4.8.
type componentUpdate struct {
	Config   json.RawMessage    `json:"config"`
	Name     *string            `json:"name"`
	Position *workflow.Position `json:"position"`
}

// ComponentSnapshot is SPEC.md 2.7.
type ComponentSnapshot struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Position  workflow.Position `json:"position"`
	Config    json.RawMessage   `json:"config"`
	UpdatedAt time.Time         `json:"updatedAt"`
}

func (s *SDKWorkflows) updateComponent(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	vars := mux.Vars(r)
	if !allowed(w, caller, vars["workflowId"]) {
		return
	}
	var body componentUpdate
	if !decodeOptionalBody(w, r, &body) {
		return
	}
	if body.Config != nil && !isJSONObject(body.Config) {
		WriteError(w, http.StatusBadRequest, "config: must be a JSON object")
		return
	}
	if string(body.Config) == "null" {
		body.Config = nil
	}
	st, err := s.Cmds.Workflows.UpdateComponent(r.Context(), caller.WorkspaceID, vars["workflowId"], vars["componentId"],
		workflow.ComponentPatch{Config: body.Config, Name: body.Name, Position: body.Position})
	if errors.Is(err, domain.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "workflow "+vars["workflowId"]+" or its component "+vars["componentId"]+" not found")
		return
	}
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	c, _ := st.Component(vars["componentId"])
	WriteJSON(w, http.StatusOK, ComponentSnapshot{ID: c.ID, Name: c.Name, Position: c.Position, Config: c.Config, UpdatedAt: c.UpdatedAt})
}

func isJSONObject(raw json.RawMessage) bool {
	if string(raw) == "null" {
		return true // "config": null changes nothing
	}
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// stream serves SPEC.md 4.7 (serveSSE): run stream events while the run goes on, ending with
// the terminal event.
func (s *SDKWorkflows) stream(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["runId"]
	if _, err := uuid.Parse(id); err != nil {
		WriteError(w, http.StatusNotFound, "run "+id+" not found")
		return
	}
	name := commands.RunStream(id)
	watch := s.Hub.WatchRecords(name) // before the state is read: nothing falls in between
	feed := &runFeed{cmds: s.Cmds, stream: name}
	first, ok := feed.fromCache(s.Hub, id, r.Header.Get("Last-Event-ID") == "")
	var err error
	if !ok {
		first, err = feed.advance(r.Context())
	}
	feed.watch = watch
	if err == nil && (!feed.state.Exists || feed.state.WorkspaceID != caller.WorkspaceID) {
		err = fmt.Errorf("run %s not found: %w", id, domain.ErrNotFound)
	}
	if err != nil {
		watch.Close()
		WriteDomainError(w, r, err)
		return
	}
	if !caller.AllowsWorkflow(feed.state.WorkflowID) {
		watch.Close()
		allowed(w, caller, feed.state.WorkflowID)
		return
	}
	serveSSE(w, r, sseStream{watch: watch, src: feed, first: first, heartbeat: s.Heartbeat, inPlaceFor: s.InPlaceFor, name: name})
}

// runFeed folds a run's stream for its SSE stream. It sends the state reached at the end of
// each read, and the state at each change of the run's status within it, so no status is
// skipped however the hub's notices coalesce.
type runFeed struct {
	cmds   *commands.Commands
	stream string
	state  run.State
	next   uint64
	// watch, once the first read is done, hands the feed the records the log brings, which
	// it folds without reading them back (fromRecords).
	watch *livehub.Watch
}

func (f *runFeed) terminal() bool { return f.state.Status.Terminal() }

func (f *runFeed) advance(ctx context.Context) ([]sseMessage, error) {
	var out []sseMessage
	from := f.next
	fold := func(rev uint64, ev domain.Event) error {
		before := f.state.Status
		f.state.Apply(ev) // the feed owns its state
		if f.state.Status == before {
			return nil
		}
		var err error
		out, err = f.appendState(out, rev)
		return err
	}
	if f.fromEnd() {
		return f.appendState(nil, f.next-1)
	}
	if !f.fromRecords(fold) {
		var err error
		if f.next, err = f.cmds.Executions.ReadEvents(ctx, f.stream, f.next, fold); err != nil {
			return nil, err
		}
	}
	if f.next > from && (len(out) == 0 || out[len(out)-1].revision != f.next-1) {
		return f.appendState(out, f.next-1)
	}
	return out, nil
}

// fromCache starts the feed from the run as this process's commands hold it (a run triggered
// here), without reading it, when the hub, watched already, has delivered no record after that
// state: every later record then comes to the watch. current: the client asks for the current
// state alone (no Last-Event-ID), which is all the cache has.
func (f *runFeed) fromCache(hub *livehub.Hub, id string, current bool) ([]sseMessage, bool) {
	if !current || hub == nil {
		return nil, false
	}
	delivered, ok := hub.Delivered(f.stream)
	if !ok {
		return nil, false
	}
	st, rev, ok := commands.CachedRun(f.cmds.Workflows, id)
	if !ok || delivered > rev+1 {
		return nil, false
	}
	f.state, f.next = st, rev+1
	out, err := f.appendState(nil, rev)
	return out, err == nil
}

// fromEnd takes the run's end as the scheduler that wrote it handed it (livehub.NotifyEnded),
// sparing the read of the run its nudge would otherwise cost, when that skips no status: the
// feed is EXECUTING, which every end follows directly. Otherwise the records say what happened.
func (f *runFeed) fromEnd() bool {
	if f.watch == nil {
		return false
	}
	end, ok := f.watch.Ended()
	if !ok || f.state.Status != run.StatusExecuting || end.Revision < f.next {
		return false
	}
	st, ok := end.State.(run.State)
	if !ok || !st.Status.Terminal() || st.ID != f.state.ID {
		return false
	}
	f.state, f.next = st, end.Revision+1
	return true
}

// fromRecords folds the records the watch kept, when they are the stream's next ones and all
// of them; false sends the feed to the store for the rest. Records it folded already (read
// from the store after a nudge) are passed over.
func (f *runFeed) fromRecords(fold func(uint64, domain.Event) error) bool {
	if f.watch == nil {
		return false
	}
	recs, complete := f.watch.Records()
	if !complete {
		return false
	}
	for _, rec := range recs {
		if rec.Revision < f.next {
			continue
		}
		if rec.Revision != f.next {
			return false // one is missing: the store has it
		}
		ev, err := domain.Events.Decode(rec.Type, rec.Data)
		if err != nil || fold(rec.Revision, ev) != nil {
			return false
		}
		f.next++
	}
	return true
}

// appendState adds a message of the state folded so far, reached at revision rev.
func (f *runFeed) appendState(out []sseMessage, rev uint64) ([]sseMessage, error) {
	data, err := json.Marshal(f.state.StreamEvent())
	if err != nil {
		return nil, fmt.Errorf("encode run stream event: %w", err)
	}
	return append(out, sseMessage{revision: rev, data: data}), nil
}

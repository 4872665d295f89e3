package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/appevent"
	"github.com/switchyard/switchyard/domain/debounce"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
)

// AppEventStream is the stream of an event id of a workspace (hashed: ids are the caller's
// text).
func AppEventStream(workspaceID, id string) string {
	sum := sha256.Sum256([]byte(workspaceID + "\n" + id))
	return eventstore.StreamName(appevent.Category, hex.EncodeToString(sum[:]))
}

// EventTriggerIndex finds the ON_EVENT components of a workspace listening for a name: the
// eventtriggers read model (projections.Queries), which commands does not import. It only
// proposes: each candidate is checked again on its workflow's stream.
type EventTriggerIndex interface {
	EventTriggersOf(ctx context.Context, workspaceID, name string) ([]appevent.Match, error)
}

// SendEvent is an event sent to POST /v1/sdk/events.
type SendEvent struct {
	WorkspaceID string
	// APIKeyID is the key that sent it; AllowedWorkflowIDs, when not empty, limits the
	// workflows it may start to the key's.
	APIKeyID           string
	AllowedWorkflowIDs []string
	// ID is the caller's id of the event, "" for none: an id sent again within
	// appevent.DedupWindow is answered with the first's runs.
	ID      string
	Name    string
	Payload json.RawMessage
	// Triggers is the index of ON_EVENT components.
	Triggers EventTriggerIndex
}

// SentEvent is what an event started.
type SentEvent struct {
	EventID string         `json:"eventId"`
	Runs    []appevent.Run `json:"runs"`
	// Duplicate is true when the id was seen within the dedup window: Runs are the first's.
	Duplicate bool `json:"duplicate,omitempty"`
}

// maxParallelDeliveries bounds the deliveries of one event under way at once.
const maxParallelDeliveries = 8

// MaxEventPayload bounds an event's payload.
const MaxEventPayload = 256 << 10

// SendEvent starts a run of every workflow of the workspace whose ON_EVENT component has the
// event's name and whose filter holds for its payload (a debounced component gathers it
// instead). An id seen within appevent.DedupWindow is not processed twice.
func (h *Events) SendEvent(ctx context.Context, c SendEvent) (SentEvent, error) {
	if err := checkEvent(c); err != nil {
		return SentEvent{}, err
	}
	if c.ID == "" {
		c.ID = uuid.NewString()
	}
	stream := AppEventStream(c.WorkspaceID, c.ID)
	matches, loaded, err := h.match(ctx, c)
	if err != nil {
		return SentEvent{}, err
	}
	r := appevent.Received{WorkspaceID: c.WorkspaceID, ID: c.ID, Name: c.Name, Payload: c.Payload, Matches: matches, APIKeyID: c.APIKeyID}
	st, received, err := h.receive(ctx, stream, r)
	if err != nil {
		return SentEvent{}, wrap("send event", err)
	}
	if !received {
		return h.answerAgain(ctx, stream, st, c) // seen within the dedup window
	}
	return h.deliverEvent(ctx, stream, st.Last, loaded, c, false)
}

// receive records reception r unless its id was seen within the dedup window, and returns the
// id's state after it, and whether r was recorded. Most ids are new, so r is decided on no
// stream and appended expecting none: a new id costs no read, and an id received before makes
// the append conflict and is decided again on its stream as read. Event streams stay out of
// the state cache: each is written about once, with a payload of up to 256 KiB, and would push
// out the aggregates that are used again.
func (h *Events) receive(ctx context.Context, stream string, r appevent.Received) (appevent.State, bool, error) {
	var st appevent.State
	var rev uint64
	expected := eventstore.NoStream()
	for attempt := 0; ; attempt++ {
		events, _ := appevent.DecideReceive(st, stream, r, h.now())
		if len(events) == 0 {
			return st, false, nil
		}
		_, err := appendEvents(ctx, h, stream, expected, events)
		if err == nil {
			return st.Evolve(events[0]), true, nil
		}
		if !isConflict(err) || attempt == maxConflictRetries {
			return st, false, err
		}
		if st, rev, err = readAppEvent(ctx, h, stream); err != nil {
			return st, false, err
		}
		expected = eventstore.Exact(rev)
	}
}

// readAppEvent folds an event id's stream from the store, bypassing the state cache.
func readAppEvent(ctx context.Context, h *Events, stream string) (appevent.State, uint64, error) {
	var st appevent.State
	var rev uint64
	for from := uint64(0); ; {
		events, err := h.store.ReadStream(ctx, stream, from, readBatch)
		if err != nil {
			return st, rev, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, rec := range events {
			e, err := domain.Events.Decode(rec.Type, rec.Data)
			if err != nil {
				return st, rev, fmt.Errorf("fold %s@%d: %w", stream, rec.Revision, err)
			}
			st, rev = st.Evolve(e), rec.Revision
		}
		if len(events) < readBatch {
			return st, rev, nil
		}
		from = rev + 1
	}
}

// checkEvent checks what the edge cannot: names, lengths and storable text.
func checkEvent(c SendEvent) error {
	if err := workflow.CheckEventName("name", c.Name); err != nil {
		return err
	}
	if len(c.ID) > appevent.MaxIDLength {
		return domain.Invalid("id", "must be at most %d characters", appevent.MaxIDLength)
	}
	if err := domain.CheckStorableString("id", c.ID); err != nil {
		return err
	}
	if len(c.Payload) > MaxEventPayload {
		return domain.Invalid("payload", "must be at most %d bytes", MaxEventPayload)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(c.Payload, &obj) != nil || obj == nil {
		return domain.Invalid("payload", "must be a JSON object")
	}
	return domain.CheckStorableJSON("payload", c.Payload)
}

// match lists the ON_EVENT components the event reaches now: the index's candidates whose
// workflow, as its stream holds it, still listens for the name and whose filter holds; and
// those workflows as read, for the deliveries.
func (h *Events) match(ctx context.Context, c SendEvent) ([]appevent.Match, map[string]workflow.State, error) {
	candidates, err := c.Triggers.EventTriggersOf(ctx, c.WorkspaceID, c.Name)
	if err != nil {
		return nil, nil, wrap("match event", err)
	}
	matches, loaded := []appevent.Match{}, map[string]workflow.State{}
	for _, m := range candidates {
		if len(c.AllowedWorkflowIDs) > 0 && !slices.Contains(c.AllowedWorkflowIDs, m.WorkflowID) {
			continue
		}
		wf, err := h.workflows.Workflow(ctx, c.WorkspaceID, m.WorkflowID)
		if err != nil {
			continue // deleted since the index saw it
		}
		if h.listens(ctx, wf.Definition, m.ComponentID, c) {
			matches = append(matches, m)
			loaded[m.WorkflowID] = wf
		}
	}
	return matches, loaded, nil
}

// listens reports whether component id of d is an ON_EVENT of the event's name whose filter
// holds for its payload. A filter that fails at run time (null compared with a number, past its
// deadline) does not hold, as an edge's condition is not taken.
func (h *Events) listens(ctx context.Context, d workflow.Definition, id string, c SendEvent) bool {
	for _, comp := range d.Components {
		if comp.ID != id || comp.Module != workflow.ModuleOnEvent {
			continue
		}
		ec, err := workflow.ParseEvent(comp.Config)
		if err != nil || ec.Name != c.Name {
			return false
		}
		if ec.Filter == "" {
			return true
		}
		f, err := payloadExpressions.getFilter(ec.Filter)
		if err != nil {
			return false
		}
		ok, err := f.Holds(ctx, c.Payload)
		return err == nil && ok
	}
	return false
}

// deliverEvent delivers reception r to each component it matched, then records the runs. A
// delivery repeated (the same event sent again before its runs were recorded, after a crash)
// finds the same runs: their ids derive from the reception.
func (h *Events) deliverEvent(ctx context.Context, stream string, r appevent.Received, loaded map[string]workflow.State, c SendEvent, again bool) (SentEvent, error) {
	var since time.Time
	if again {
		since = r.At
	}
	// The matched workflows are delivered to at once (a few at a time): each delivery is its
	// own run's append, and the answer waits for them all.
	found := make([]*appevent.Run, len(r.Matches))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxParallelDeliveries)
	for i, m := range r.Matches {
		g.Go(func() error {
			wf, ok := loaded[m.WorkflowID]
			if !ok {
				var err error
				if wf, err = h.workflows.Workflow(gctx, r.WorkspaceID, m.WorkflowID); err != nil {
					return nil // deleted meanwhile: no run
				}
			}
			d, err := deliverTo(gctx, h.workflows, wf, Delivery{WorkspaceID: r.WorkspaceID, WorkflowID: m.WorkflowID, TriggerID: m.ComponentID,
				ID: r.EventID, Payload: r.Payload}, since)
			if err != nil {
				return fmt.Errorf("deliver event %s to workflow %s: %w", r.EventID, m.WorkflowID, err)
			}
			if d.RunID != "" {
				found[i] = &appevent.Run{WorkflowID: m.WorkflowID, RunID: d.RunID, Debounced: d.Debounced}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return SentEvent{}, err
	}
	runs := []appevent.Run{}
	for _, run := range found {
		if run != nil {
			runs = append(runs, *run)
		}
	}
	// Only a debounced run needs its delivery recorded: the same event sent again finds a
	// run of its own by its derived id, but could not tell which window it went to.
	// Delivered is identified by the reception: appended again after a conflict (the same id
	// sent twice at once), it is one.
	if slices.ContainsFunc(runs, func(r appevent.Run) bool { return r.Debounced }) {
		events, _ := appevent.DecideDelivered(appevent.State{Exists: true, Last: r}, r.EventID, runs, h.now())
		if _, err := appendEvents(ctx, h, stream, eventstore.Any(), events); err != nil {
			return SentEvent{}, wrap("send event", err)
		}
	}
	return SentEvent{EventID: r.EventID, Runs: visible(runs, c.AllowedWorkflowIDs)}, nil
}

// answerAgain answers an id seen within the dedup window: the first reception's runs, after
// finishing its deliveries when a crash interrupted them. A reception without Delivered (one
// that reached no debounced trigger, or was interrupted) is delivered again: its runs exist
// already, under their derived ids, and are found, not started.
func (h *Events) answerAgain(ctx context.Context, stream string, s appevent.State, c SendEvent) (SentEvent, error) {
	if !s.Delivered {
		out, err := h.deliverEvent(ctx, stream, s.Last, nil, c, true)
		out.Duplicate = true
		return out, err
	}
	return SentEvent{EventID: s.Last.EventID, Runs: visible(s.Runs, c.AllowedWorkflowIDs), Duplicate: true}, nil
}

// visible keeps the runs of the workflows a scoped key may use.
func visible(runs []appevent.Run, allowed []string) []appevent.Run {
	if len(allowed) == 0 {
		return runs
	}
	out := []appevent.Run{}
	for _, r := range runs {
		if slices.Contains(allowed, r.WorkflowID) {
			out = append(out, r)
		}
	}
	return out
}

// FlushDebounce starts the run of debounce window stream if it is due at the clock's now (the
// debounce reactor's timer). It answers when the window is due otherwise (a delivery since
// moved it), zero once its run has started or could not be; an error is worth a retry.
func (h *Events) FlushDebounce(ctx context.Context, stream string) (next time.Time, err error) {
	d, err := flushWindow(ctx, h.workflows, stream, false)
	if err != nil || d.Started || d.RunID != "" {
		return time.Time{}, err
	}
	l, err := load(ctx, h, stream, debounceAgg)
	if err != nil {
		return time.Time{}, wrap("flush debounce", err)
	}
	if l.state.Flushed && !l.state.Started {
		return h.now(), nil // flushed, its start refused for now: again soon
	}
	next, _ = l.state.Due()
	return next, nil
}

// DebounceWindow folds a debounce window.
func (h *Events) DebounceWindow(ctx context.Context, stream string) (debounce.State, error) {
	l, err := load(ctx, h, stream, debounceAgg)
	return l.state, wrap("debounce window", err)
}

// checkComponentExpressions compiles the trigger expressions (filter, debounce key) of a
// component update's merged config; the error names the field from "config".
func checkComponentExpressions(s workflow.State, events []domain.Event) error {
	for _, e := range events {
		u, ok := e.(workflow.ComponentUpdated)
		if !ok {
			continue
		}
		c, _ := s.Component(u.ComponentID)
		c.Config = u.Config
		d := workflow.Definition{Components: []workflow.Component{c}}
		err := d.ValidateTriggerExpressions(checkPayloadFilter, checkPayloadValue)
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			_, field, _ := strings.Cut(ve.Field, ").")
			return domain.Invalid(field, "%s", ve.Message)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

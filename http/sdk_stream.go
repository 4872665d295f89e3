package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// DefaultSSEHeartbeat is the interval of :ping comments (SPEC.md 6.2).
const DefaultSSEHeartbeat = 15 * time.Second

// sseRetryMs is the reconnect delay the stream suggests to clients (the SSE retry: field).
const sseRetryMs = 2000

// StreamEvent is a component execution stream event (SPEC.md 2.3): output only on COMPLETED,
// error only on FAILED.
type StreamEvent struct {
	ID        string           `json:"id"`
	Status    execution.Status `json:"status"`
	Output    *json.RawMessage `json:"output,omitempty"`
	Error     *json.RawMessage `json:"error,omitempty"`
	Timestamp time.Time        `json:"timestamp"`
}

// statusChange is a state the stream reports: where in the execution's stream it was reached
// (the SSE id) and the event sent for it.
type statusChange struct {
	revision uint64
	event    StreamEvent
}

// executionFeed folds an execution's stream incrementally and reports each change of status.
// Reading the stream itself (rather than a cached state) means no status is skipped even when
// the hub's notices coalesce: RUNNING is reported even if the execution ended before the
// stream caught up.
type executionFeed struct {
	store  eventstore.Store
	stream string
	state  execution.State
	next   uint64
	exists bool
}

// advance reads the events after those folded and returns the changes of status among them.
func (f *executionFeed) advance(ctx context.Context) ([]statusChange, error) {
	var out []statusChange
	for {
		recs, err := f.store.ReadStream(ctx, f.stream, f.next, 256)
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f.stream, err)
		}
		for _, rec := range recs {
			ev, err := domain.Events.Decode(rec.Type, rec.Data)
			if err != nil {
				return nil, fmt.Errorf("fold %s@%d: %w", f.stream, rec.Revision, err)
			}
			before := f.state.Status
			f.state = f.state.Evolve(ev)
			f.next, f.exists = rec.Revision+1, f.state.Exists
			if f.state.Status != before {
				out = append(out, statusChange{revision: rec.Revision, event: streamEventOf(f.state)})
			}
		}
		if len(recs) < 256 {
			return out, nil
		}
	}
}

func streamEventOf(s execution.State) StreamEvent {
	e := StreamEvent{ID: s.ID, Status: s.Status, Timestamp: s.UpdatedAt}
	r := s.Record()
	switch s.Status {
	case execution.StatusCompleted:
		e.Output = &r.Output
	case execution.StatusFailed:
		e.Error = &r.Error
	}
	return e
}

// stream serves SPEC.md 4.3: the current state at once, then each change of status until the
// execution ends, with :ping comments in between. A Last-Event-ID (the id of the last message
// the client saw) resumes: the changes after it are sent, ending with the current state; the
// current state is always sent at once on connecting (SPEC.md 6.2).
func (s *SDKComponents) stream(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["executionId"]
	if _, err := uuid.Parse(id); err != nil {
		WriteError(w, http.StatusNotFound, "execution "+id+" not found")
		return
	}
	ctx := r.Context()
	name := commands.ExecutionStream(id)
	// Registered before the state is read: an update that lands in between still wakes us.
	watch := s.Hub.Watch(name)
	defer watch.Close()
	feed := &executionFeed{store: s.Cmds.Store(), stream: name}
	changes, err := feed.advance(ctx)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	if !feed.exists || feed.state.WorkspaceID != caller.WorkspaceID {
		WriteError(w, http.StatusNotFound, "execution "+id+" not found")
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", sseRetryMs); err != nil {
		return
	}
	if !send(w, rc, resumeFrom(changes, r.Header.Get("Last-Event-ID"))) || feed.state.Status.Terminal() {
		return
	}
	heartbeat := s.Heartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultSSEHeartbeat
	}
	ping := time.NewTicker(heartbeat)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if _, err := w.Write([]byte(":ping\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		case <-watch.C:
			changes, err := feed.advance(ctx)
			if err != nil {
				LoggerFrom(ctx).WithError(err).WithField("executionId", id).Warn("execution stream: cannot read updates")
				return // the client reconnects with Last-Event-ID and loses nothing
			}
			if !send(w, rc, changes) || feed.state.Status.Terminal() {
				return
			}
		}
	}
}

// resumeFrom picks what a connecting client is sent: the changes after its Last-Event-ID, or
// the current state alone (also when the id is unknown or current).
func resumeFrom(changes []statusChange, lastEventID string) []statusChange {
	cur := changes[len(changes)-1:]
	last, err := strconv.ParseUint(strings.TrimSpace(lastEventID), 10, 64)
	if err != nil {
		return cur
	}
	for i, c := range changes {
		if c.revision > last {
			return changes[i:]
		}
	}
	return cur
}

// send writes one message per change and flushes each; false when the client is gone.
func send(w http.ResponseWriter, rc *http.ResponseController, changes []statusChange) bool {
	for _, c := range changes {
		data, err := json.Marshal(c.event)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", c.revision, data); err != nil {
			return false
		}
		if rc.Flush() != nil {
			return false
		}
	}
	return true
}

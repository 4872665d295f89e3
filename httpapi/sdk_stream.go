package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/reactors/livehub"
)

// DefaultSSEHeartbeat is the interval of :ping comments (SPEC.md 6.2).
const DefaultSSEHeartbeat = 15 * time.Second

// sseWriteTimeout bounds one write to a stream's client.
const sseWriteTimeout = 10 * time.Second

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

// sseMessage is a state a stream reports: where in the entity's stream it was reached (the
// SSE id) and the JSON sent for it.
type sseMessage struct {
	revision uint64
	data     []byte
}

// sseSource folds an entity's stream for an SSE response.
type sseSource interface {
	// advance reads the events after those folded and returns the messages they make.
	advance(ctx context.Context) ([]sseMessage, error)
	// terminal reports whether the entity has ended: the stream then closes.
	terminal() bool
}

// executionFeed folds an execution's stream incrementally and reports each change of status.
// Reading the stream itself (rather than a cached state) means no status is skipped even when
// the hub's notices coalesce: RUNNING is reported even if the execution ended before the
// stream caught up.
type executionFeed struct {
	cmds   *commands.Commands
	stream string
	state  execution.State
	next   uint64
	exists bool
}

func (f *executionFeed) terminal() bool { return f.state.Status.Terminal() }

// advance reads the events after those folded and returns the changes of status among them.
func (f *executionFeed) advance(ctx context.Context) ([]sseMessage, error) {
	var out []sseMessage
	var err error
	f.next, err = f.cmds.Executions.ReadEvents(ctx, f.stream, f.next, func(rev uint64, ev domain.Event) error {
		before := f.state.Status
		f.state = f.state.Evolve(ev)
		f.exists = f.state.Exists
		if f.state.Status == before {
			return nil
		}
		data, err := json.Marshal(streamEventOf(f.state))
		if err != nil {
			return fmt.Errorf("encode stream event: %w", err)
		}
		out = append(out, sseMessage{revision: rev, data: data})
		return nil
	})
	return out, err
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
// execution ends (serveSSE).
func (s *SDKComponents) stream(w http.ResponseWriter, r *http.Request) {
	caller, _ := CallerFrom(r.Context())
	id := mux.Vars(r)["executionId"]
	if _, err := uuid.Parse(id); err != nil {
		WriteError(w, http.StatusNotFound, "execution "+id+" not found")
		return
	}
	name := commands.ExecutionStream(id)
	// Registered before the state is read: an update that lands in between still wakes us.
	watch := s.Hub.Watch(name)
	feed := &executionFeed{cmds: s.Cmds, stream: name}
	changes, err := feed.advance(r.Context())
	if err == nil && (!feed.exists || feed.state.WorkspaceID != caller.WorkspaceID) {
		err = fmt.Errorf("execution %s not found: %w", id, domain.ErrNotFound)
	}
	if err != nil {
		watch.Close()
		WriteDomainError(w, r, err)
		return
	}
	serveSSE(w, r, sseStream{watch: watch, src: feed, first: changes, heartbeat: s.Heartbeat, name: name})
}

// sseStream is one SSE response: the hub watch of the entity's stream, its source, the
// messages of its state so far, and the heartbeat interval (DefaultSSEHeartbeat when 0).
type sseStream struct {
	watch     *livehub.Watch
	src       sseSource
	first     []sseMessage
	heartbeat time.Duration
	name      string
}

// serveSSE sends the current state at once, then each message as it happens, with :ping
// comments in between, until the entity ends or the client leaves. A Last-Event-ID (the id of
// the last message the client saw) resumes: the messages after it are sent, ending with the
// current state; the current state is always sent at once on connecting (SPEC.md 6.2). It owns
// st.watch and closes it.
func serveSSE(w http.ResponseWriter, r *http.Request, st sseStream) {
	ctx := r.Context()
	watch := st.watch
	detach := false // set when a goroutine of the stream's own takes the watch over
	defer func() {
		if !detach {
			watch.Close()
		}
	}()
	heartbeat := st.heartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultSSEHeartbeat
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	first := fmt.Appendf(nil, "retry: %d\n\n", sseRetryMs)
	first = appendMessages(first, resumeFrom(st.first, r.Header.Get("Last-Event-ID")))
	terminal := st.src.terminal()
	// An HTTP/1 stream takes its connection over: an idle stream is then two small goroutines
	// (the follower and a reader that notices the client leaving) instead of the server's
	// connection goroutine, with the stack of the whole request, its background reader and
	// its buffers (docs/performance.md). HTTP/2 cannot be taken over and is served in place.
	if !terminal {
		if conn, ok := hijack(w); ok {
			h.Set("Connection", "close")
			head := []byte("HTTP/1.1 200 OK\r\n")
			var hb strings.Builder
			_ = h.Write(&hb)
			head = append(append(append(head, hb.String()...), "\r\n"...), first...)
			out := connWriter{conn}
			if out.write(head) != nil {
				conn.Close()
				watch.Close()
				return
			}
			fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			gone := make(chan struct{})
			go func() {
				defer close(gone)
				var buf [64]byte
				for {
					if _, err := conn.Read(buf[:]); err != nil {
						return
					}
				}
			}()
			go func() {
				defer cancel()
				defer conn.Close()
				defer watch.Close()
				follow(fctx, st.name, st.src, watch, heartbeat, gone, out.write)
			}()
			detach = true
			return
		}
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	out := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if out(first) != nil || terminal {
		return
	}
	follow(ctx, st.name, st.src, watch, heartbeat, ctx.Done(), out)
}

// hijack takes the connection of an HTTP/1 request over.
func hijack(w http.ResponseWriter) (net.Conn, bool) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	_ = brw // nothing further is read from the request; its buffers go
	return conn, true
}

// connWriter writes to a taken-over connection, each write bounded so that a client that
// stopped reading cannot hold the stream forever.
type connWriter struct{ conn net.Conn }

func (c connWriter) write(b []byte) error {
	if err := c.conn.SetWriteDeadline(time.Now().Add(sseWriteTimeout)); err != nil {
		return err
	}
	_, err := c.conn.Write(b)
	return err
}

// follow sends each message as it happens, and a :ping every heartbeat, until the entity ends
// or the client is gone.
func follow(ctx context.Context, name string, feed sseSource, watch *livehub.Watch, heartbeat time.Duration, gone <-chan struct{}, out func([]byte) error) {
	ping := time.NewTicker(heartbeat)
	defer ping.Stop()
	for {
		select {
		case <-gone:
			return
		case <-ping.C:
			if out([]byte(":ping\n\n")) != nil {
				return
			}
		case <-watch.C:
			changes, err := feed.advance(ctx)
			if err != nil {
				LoggerFrom(ctx).WithError(err).WithField("stream", name).Warn("SSE stream: cannot read updates")
				return // the client reconnects with Last-Event-ID and loses nothing
			}
			if len(changes) > 0 && out(appendMessages(nil, changes)) != nil {
				return
			}
			if feed.terminal() {
				return
			}
		}
	}
}

// resumeFrom picks what a connecting client is sent: the changes after its Last-Event-ID, or
// the current state alone (also when the id is unknown or current).
func resumeFrom(changes []sseMessage, lastEventID string) []sseMessage {
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

// appendMessages appends one SSE message per change.
func appendMessages(b []byte, changes []sseMessage) []byte {
	for _, c := range changes {
		b = fmt.Appendf(b, "id: %d\ndata: %s\n\n", c.revision, c.data)
	}
	return b
}

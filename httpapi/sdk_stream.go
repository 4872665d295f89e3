package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
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
	serveSSE(w, r, sseStream{watch: watch, src: feed, first: changes, heartbeat: s.Heartbeat, inPlaceFor: s.InPlaceFor, name: name})
}

// sseStream is one SSE response: the hub watch of the entity's stream, its source, the
// messages of its state so far, and the heartbeat interval (DefaultSSEHeartbeat when 0).
type sseStream struct {
	watch     *livehub.Watch
	src       sseSource
	first     []sseMessage
	heartbeat time.Duration
	// inPlaceFor is the stream's time in place before it is taken over (none when 0).
	inPlaceFor time.Duration
	name       string
}

// streamsInPlace counts the streams served in place (StreamsInPlace).
var streamsInPlace atomic.Int64

// StreamsInPlace is the number of SSE streams open and not yet taken over.
func StreamsInPlace() int64 { return streamsInPlace.Load() }

// serveSSE sends the current state at once, then each message as it happens, with :ping
// comments in between, until the entity ends or the client leaves. A Last-Event-ID (the id of
// the last message the client saw) resumes: the messages after it are sent, ending with the
// current state; the current state is always sent at once on connecting (SPEC.md 6.2). It owns
// st.watch and closes it.
//
// An HTTP/1 stream sends its headers and first messages in place (chunked), then takes its
// connection over after its time in place (none by default): an idle stream is then two small
// goroutines (the follower and a reader that notices the client leaving) instead of the
// server's connection goroutine, with the stack of the whole request, its background reader
// and its buffers (docs/performance.md). Serving streams in place for a second kept about 3 KiB
// more an idle stream, past the 16 KiB target. A stream that ends cleanly gives its
// connection back to the server for the client's next request (ConnReturn), so a client
// waiting for call after call by stream dials once. HTTP/2 cannot be taken over and is served
// in place throughout.
func serveSSE(w http.ResponseWriter, r *http.Request, st sseStream) {
	ctx := r.Context()
	detached := false // set when the stream's own goroutine takes the watch over
	defer func() {
		if !detached {
			st.watch.Close()
		}
	}()
	if st.heartbeat <= 0 {
		st.heartbeat = DefaultSSEHeartbeat
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	first := fmt.Appendf(nil, "retry: %d\n\n", sseRetryMs)
	first = appendMessages(first, resumeFrom(st.first, r.Header.Get("Last-Event-ID")))
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	out := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if out(first) != nil || st.src.terminal() {
		return
	}
	var handover <-chan time.Time
	if r.ProtoMajor == 1 {
		t := time.NewTimer(max(st.inPlaceFor, 0))
		defer t.Stop()
		handover = t.C
	}
	streamsInPlace.Add(1)
	open := follow(ctx, st, ctx.Done(), handover, out)
	streamsInPlace.Add(-1)
	if open {
		detached = takeOver(w, r, st)
	}
}

// takeOver goes on with an HTTP/1 stream whose headers and first messages were sent in place,
// on the connection taken over from the server, in goroutines of its own; it reports false
// when the connection cannot be taken over. The response keeps its framing: chunked for
// HTTP/1.1, ended by its last chunk, after which the connection goes back to the server for
// the client's next request (ConnReturn) or, when it cannot, is closed.
func takeOver(w http.ResponseWriter, r *http.Request, st sseStream) bool {
	conn, clean, ok := hijack(w)
	if !ok {
		return false
	}
	st.first = nil // sent: an idle stream need not hold it
	t := &takenOver{conn: conn, out: connWriter{conn: conn, chunked: r.ProtoAtLeast(1, 1)}, clean: clean,
		returns: connReturnFrom(r.Context()), gone: make(chan struct{})}
	fctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	go t.read()
	go func() {
		defer cancel()
		defer st.watch.Close()
		follow(fctx, st, t.gone, nil, t.out.write)
		t.end(st.src.terminal())
	}()
	return true
}

// takenOver is a stream's connection taken over from the server. Its goroutines block with
// small stacks: what runs after the stream ends is in methods of its own.
type takenOver struct {
	conn    net.Conn
	out     connWriter
	clean   bool // no bytes past the request were buffered (hijack)
	returns *ConnReturn
	gone    chan struct{} // closed when read returns
	stray   atomic.Bool   // the client sent bytes mid-stream: its connection is not reused
}

// read notices the client leaving (gone), and bytes it should not send yet (stray).
func (t *takenOver) read() {
	defer close(t.gone)
	var buf [64]byte
	for {
		n, err := t.conn.Read(buf[:])
		if n > 0 {
			t.stray.Store(true)
		}
		if err != nil {
			return
		}
	}
}

// end ends the response once the stream has: a clean end (terminal) sends the last chunk and
// gives the connection back; any other closes it without, so the client does not keep a
// connection about to be closed under its next request.
func (t *takenOver) end(terminal bool) {
	if !terminal || !t.out.chunked || !t.clean || !t.returns.taking() {
		t.conn.Close()
		return
	}
	// Stop the reader before the last chunk: once the client has it, the bytes it sends are
	// its next request, for the server to read.
	_ = t.conn.SetReadDeadline(time.Unix(1, 0))
	<-t.gone
	if t.stray.Load() || t.out.end() != nil || t.conn.SetDeadline(time.Time{}) != nil || !t.returns.give(detachSlot(t.conn)) {
		t.conn.Close()
	}
}

// hijack takes the connection of an HTTP/1 request over; clean is false when the server had
// read bytes past the request (a pipelined request), which would be lost with its buffers.
func hijack(w http.ResponseWriter) (conn net.Conn, clean, ok bool) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false, false
	}
	return conn, brw.Reader.Buffered() == 0, true
}

// connWriter writes a taken-over stream's messages, each as one chunk when chunked.
type connWriter struct {
	conn    net.Conn
	chunked bool
}

func (c connWriter) write(b []byte) error {
	if c.chunked {
		b = append(append(fmt.Appendf(nil, "%x\r\n", len(b)), b...), "\r\n"...)
	}
	return c.send(b)
}

// end ends a chunked response with its last chunk.
func (c connWriter) end() error {
	if !c.chunked {
		return nil
	}
	return c.send([]byte("0\r\n\r\n"))
}

// send writes b, bounded in time so that a client that stopped reading cannot hold the
// stream forever.
func (c connWriter) send(b []byte) error {
	if err := c.conn.SetWriteDeadline(time.Now().Add(sseWriteTimeout)); err != nil {
		return err
	}
	_, err := c.conn.Write(b)
	return err
}

// follow sends each message as it happens, and a :ping every heartbeat, until the entity ends
// or the client is gone, or handover fires (nil: never): it then reports true, the stream
// still open.
func follow(ctx context.Context, st sseStream, gone <-chan struct{}, handover <-chan time.Time, out func([]byte) error) bool {
	ping := time.NewTicker(st.heartbeat)
	defer ping.Stop()
	for {
		select {
		case <-gone:
			return false
		case <-handover:
			return true
		case <-ping.C:
			if out([]byte(":ping\n\n")) != nil {
				return false
			}
		case <-st.watch.C:
			changes, err := st.src.advance(ctx)
			if err != nil {
				LoggerFrom(ctx).WithError(err).WithField("stream", st.name).Warn("SSE stream: cannot read updates")
				return false // the client reconnects with Last-Event-ID and loses nothing
			}
			if len(changes) > 0 && out(appendMessages(nil, changes)) != nil {
				return false
			}
			if st.src.terminal() {
				return false
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

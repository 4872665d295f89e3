package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrTimeout is the error of WaitForResult and WaitForRun when the timeout passes first; its
// text is the one SPEC.md 7 prescribes.
var ErrTimeout = errors.New("Execution timed out") //nolint:staticcheck // the exact text is specified

// DefaultWaitTimeout is the wait helpers' timeout when none is given (SPEC.md 8).
const DefaultWaitTimeout = 60000 * time.Millisecond

// StreamEvent is a component execution stream event (SPEC.md 2.3). Output is set only on
// COMPLETED, Error only on FAILED (each may hold JSON null).
type StreamEvent struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
	Timestamp time.Time       `json:"timestamp"`
	// EventID is the SSE id of the message, to resume from with StreamOptions.LastEventID.
	EventID string `json:"-"`
}

// Terminal reports whether the event ends the stream.
func (e *StreamEvent) Terminal() bool { return e.Status == StatusCompleted || e.Status == StatusFailed }

func (e *StreamEvent) setEventID(id string) { e.EventID = id }

// StreamOptions tunes StreamExecution and StreamRun.
type StreamOptions struct {
	// LastEventID resumes after the message with this SSE id.
	LastEventID string
	// MaxReconnects bounds consecutive failed reconnections before the error is yielded
	// (default 5; negative: never reconnect).
	MaxReconnects int
}

// StreamExecution follows an execution's stream (SPEC.md 4.3): it yields each update in order
// and stops after the terminal one. A dropped connection is resumed with Last-Event-ID (the
// server sends the current state at once on reconnecting). An error ends the sequence: an
// *Error for an answer such as 404, or the connection's error once reconnecting gave up.
// Stopping the range loop closes the connection.
func (c *Client) StreamExecution(ctx context.Context, executionID string, opts *StreamOptions) iter.Seq2[*StreamEvent, error] {
	return follow[StreamEvent](c, ctx, "/v1/sdk/components/executions/"+url.PathEscape(executionID)+"/stream", opts)
}

// WaitOptions tunes WaitForResult and WaitForRun.
type WaitOptions struct {
	// TimeoutMs bounds the wait (default 60000).
	TimeoutMs int
}

// WaitForResult follows the execution's stream until it is COMPLETED or FAILED and returns the
// terminal event (Output or Error set). When the timeout passes first the error is ErrTimeout,
// whose text reads "Execution timed out". The caller's ctx ending returns ctx's error.
func (c *Client) WaitForResult(ctx context.Context, executionID string, opts *WaitOptions) (*StreamEvent, error) {
	return waitFor(ctx, opts, func(wctx context.Context, so *StreamOptions) iter.Seq2[*StreamEvent, error] {
		return c.StreamExecution(wctx, executionID, so)
	})
}

// ReplayCallback re-delivers the terminal webhook of a finished execution (SPEC.md 4.4) and
// returns the record. A replay while a delivery is still pending queues nothing more.
func (c *Client) ReplayCallback(ctx context.Context, executionID string) (*Execution, error) {
	var out Execution
	if err := c.do(ctx, http.MethodPost, "/v1/sdk/components/executions/"+url.PathEscape(executionID)+"/replay-callback", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// streamEvent is what a stream carries: a JSON message that knows whether it ends the stream
// and remembers its SSE id. Both the execution and the run stream fit it, so they share one
// reader with one reconnection policy.
type streamEvent[E any] interface {
	*E
	Terminal() bool
	setEventID(string)
}

// follow reads the SSE stream at path with reconnection (see StreamExecution).
func follow[E any, P streamEvent[E]](c *Client, ctx context.Context, path string, opts *StreamOptions) iter.Seq2[P, error] {
	var o StreamOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxReconnects == 0 {
		o.MaxReconnects = 5
	}
	return func(yield func(P, error) bool) {
		lastID, retry, failures := o.LastEventID, 2*time.Second, 0
		for {
			got, stop, err := streamOnce[E, P](c, ctx, path, lastID, &retry, func(e P, id string) bool {
				lastID = id
				return yield(e, nil)
			})
			if stop {
				return
			}
			if got {
				failures = 0
			}
			// An answer that says "not now" (retryable: a restarting database, the stream cap) is
			// waited out like a dropped connection; any other answer is final.
			var apiErr *Error
			final := errors.As(err, &apiErr) && !retryable[apiErr.StatusCode]
			if ctx.Err() != nil || final || failures >= o.MaxReconnects || o.MaxReconnects < 0 {
				if err == nil {
					err = errors.New("client: the stream ended before it reached a terminal status")
				}
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(nil, err)
				return
			}
			failures++
			wait := retry
			if apiErr != nil && apiErr.retryAfterSet {
				wait = apiErr.RetryAfter
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// streamOnce reads one connection. got reports whether any message arrived; stop is true when
// the consumer stopped or the terminal event was passed on.
func streamOnce[E any, P streamEvent[E]](c *Client, ctx context.Context, path, lastID string, retry *time.Duration, emit func(P, string) bool) (got, stop bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return false, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	hc := *c.httpClient
	hc.Timeout = 0 // a stream lives as long as the execution or run; ctx bounds it
	resp, err := hc.Do(req)
	if err != nil {
		return false, false, fmt.Errorf("client: stream %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return false, false, errorOf(resp, data)
	}
	rd := bufio.NewReader(resp.Body)
	var data strings.Builder
	var eventID string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return got, false, fmt.Errorf("client: stream %s: %w", path, err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			e := P(new(E))
			if err := json.Unmarshal([]byte(data.String()), e); err != nil {
				return got, false, fmt.Errorf("client: stream %s: bad message: %w", path, err)
			}
			data.Reset()
			e.setEventID(eventID)
			got = true
			if !emit(e, eventID) {
				return got, true, nil
			}
			if e.Terminal() {
				drainEnd(rd, cancel)
				return got, true, nil
			}
		case strings.HasPrefix(line, ":"): // a comment: the :ping heartbeat
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			case "id":
				eventID = value
			case "retry":
				if ms, err := strconv.Atoi(value); err == nil && ms > 0 {
					*retry = time.Duration(ms) * time.Millisecond
				}
			}
		}
	}
}

// streamDrainFor bounds drainEnd's wait for the end of a stream past its terminal event, and
// streamDrainMax what it reads.
const (
	streamDrainFor = time.Second
	streamDrainMax = 64 << 10
)

// drainEnd reads what is left of a stream that sent its terminal event, which the server ends
// right after it: read to its end, the connection goes back to the client's pool for its next
// request instead of being closed. A stream that does not end within streamDrainFor is
// cancelled (its connection is closed then).
func drainEnd(rd io.Reader, cancel context.CancelFunc) {
	t := time.AfterFunc(streamDrainFor, cancel)
	defer t.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(rd, streamDrainMax))
}

// waitFor follows a stream until its terminal event, within the wait timeout; open starts the
// stream under the timeout's context. A stream that drops is reopened for as long as the
// timeout allows, so only the timeout (or the caller's ctx) ends a healthy wait.
func waitFor[P interface{ Terminal() bool }](ctx context.Context, opts *WaitOptions, open func(context.Context, *StreamOptions) iter.Seq2[P, error]) (P, error) {
	var zero P
	timeout := DefaultWaitTimeout
	if opts != nil && opts.TimeoutMs > 0 {
		timeout = time.Duration(opts.TimeoutMs) * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for e, err := range open(wctx, &StreamOptions{MaxReconnects: 1 << 30}) {
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return zero, ErrTimeout
			}
			return zero, err
		}
		if e.Terminal() {
			return e, nil
		}
	}
	if ctx.Err() == nil && wctx.Err() != nil {
		return zero, ErrTimeout
	}
	return zero, errors.New("client: the stream ended before it reached a terminal status")
}

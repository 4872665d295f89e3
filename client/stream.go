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

// ErrTimeout is WaitForResult's error when the timeout passes first; its text is the one
// SPEC.md 7 prescribes.
var ErrTimeout = errors.New("Execution timed out") //nolint:staticcheck // the exact text is specified

// DefaultWaitTimeout is WaitForResult's timeout when none is given (SPEC.md 8).
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

// StreamOptions tunes StreamExecution.
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
	var o StreamOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxReconnects == 0 {
		o.MaxReconnects = 5
	}
	return func(yield func(*StreamEvent, error) bool) {
		lastID, retry, failures := o.LastEventID, 2*time.Second, 0
		for {
			got, stop, err := c.streamOnce(ctx, executionID, lastID, &retry, func(e *StreamEvent) bool {
				lastID = e.EventID
				return yield(e, nil)
			})
			if stop {
				return
			}
			if got {
				failures = 0
			}
			var apiErr *Error
			if ctx.Err() != nil || errors.As(err, &apiErr) || failures >= o.MaxReconnects || o.MaxReconnects < 0 {
				if err == nil {
					err = errors.New("client: the stream ended before the execution finished")
				}
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(nil, err)
				return
			}
			failures++
			select {
			case <-ctx.Done():
			case <-time.After(retry):
			}
		}
	}
}

// streamOnce reads one connection. got reports whether any message arrived; stop is true when
// the consumer stopped or the terminal event was passed on.
func (c *Client) streamOnce(ctx context.Context, id, lastID string, retry *time.Duration, emit func(*StreamEvent) bool) (got, stop bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/sdk/components/executions/"+url.PathEscape(id)+"/stream", nil)
	if err != nil {
		return false, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	hc := *c.httpClient
	hc.Timeout = 0 // a stream lives as long as the execution; ctx bounds it
	resp, err := hc.Do(req)
	if err != nil {
		return false, false, fmt.Errorf("client: stream %s: %w", id, err)
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
			return got, false, fmt.Errorf("client: stream %s: %w", id, err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var e StreamEvent
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return got, false, fmt.Errorf("client: stream %s: bad message: %w", id, err)
			}
			data.Reset()
			e.EventID, got = eventID, true
			if !emit(&e) || e.Terminal() {
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

// WaitOptions tunes WaitForResult.
type WaitOptions struct {
	// TimeoutMs bounds the wait (default 60000).
	TimeoutMs int
}

// WaitForResult follows the execution's stream until it is COMPLETED or FAILED and returns the
// terminal event (Output or Error set). When the timeout passes first the error is ErrTimeout,
// whose text reads "Execution timed out". The caller's ctx ending returns ctx's error.
func (c *Client) WaitForResult(ctx context.Context, executionID string, opts *WaitOptions) (*StreamEvent, error) {
	timeout := DefaultWaitTimeout
	if opts != nil && opts.TimeoutMs > 0 {
		timeout = time.Duration(opts.TimeoutMs) * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for e, err := range c.StreamExecution(wctx, executionID, &StreamOptions{MaxReconnects: 1 << 30}) {
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return nil, ErrTimeout
			}
			return nil, err
		}
		if e.Terminal() {
			return e, nil
		}
	}
	if ctx.Err() == nil && wctx.Err() != nil {
		return nil, ErrTimeout
	}
	return nil, errors.New("client: the stream ended before the execution finished")
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

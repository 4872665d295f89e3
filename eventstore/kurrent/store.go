// Package kurrent is the KurrentDB (formerly EventStoreDB) backend of eventstore.Store, built on the
// gRPC client github.com/EventStore/EventStore-Client-Go/v4 (package esdb).
//
// Mapping in short (docs/kurrentdb.md has the long form):
//
//   - Append is AppendToStream with the expected revision mapped one to one (Any, NoStream,
//     StreamExists, Exact(n) = Revision(n)). Re-appending the same event IDs at the same revisions is
//     answered by the server as a success without writing (KurrentDB's native idempotency); the store
//     returns the revision and position the server reports for them. A wrong-expected-version result
//     becomes *eventstore.WrongExpectedVersionError carrying the actual revision, or
//     eventstore.ErrIdempotencyConflict when the server rejected the append because only part of it
//     matched events already written. With Any and StreamExists the server recognises repeats by ID
//     alone, so for those the store checks that a multi-event append's events are in the stream in
//     order. KurrentDB has no index of event IDs across streams: an ID reused in another stream is
//     not detected (the Postgres backend reports ErrIdempotencyConflict).
//   - Positions are KurrentDB's own (commit, prepare) log positions.
//   - ReadAll pages through $all forwards and filters on the client; Subscribe is a catch-up
//     SubscribeToAll with a server-side filter. Both are strictly after the given position and never
//     return KurrentDB's system events (streams or types starting with '$').
//
// # Stream prefix
//
// A KurrentDB server has one global log, $all, shared by everything written to it. Config.StreamPrefix
// carves a namespace out of it: the prefix is prepended to every stream name on write and stripped on
// read, and every read of $all, subscription and HeadPosition only considers streams that carry it. Two
// stores with different prefixes therefore see disjoint logs on one server. The conformance test uses a
// fresh random prefix per test so each test starts from an empty log; a deployment normally leaves the
// prefix empty (or uses one to host several Switchyard environments on one server).
package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/switchyard/switchyard/eventstore"
)

// Config tunes a Store. The zero value is ready to use.
type Config struct {
	// StreamPrefix is prepended to every stream name on write and stripped on read; reads of $all,
	// subscriptions and HeadPosition ignore streams without it. It isolates stores sharing one
	// server (see the package documentation). It must not start with '$'. End it with a separator
	// that stream names do not begin with, such as "_" or ".", so that one prefix is never the
	// beginning of another.
	StreamPrefix string
	// ReadBatchSize is the page size of $all reads in ReadAll and HeadPosition. Default 512.
	ReadBatchSize int
	// SubscriptionBuffer is the capacity of a subscription's Events channel. Default 256.
	SubscriptionBuffer int
	// MaxResubscribeAttempts bounds how many times in a row a dropped subscription is re-established
	// (from the last event it saw, with exponential backoff) before it ends with the error. Default 8;
	// negative disables resubscription.
	MaxResubscribeAttempts int
	// Logger receives the esdb client's own log lines (discovery, reconnects). Nil discards them: the
	// store reports every failure through its return values.
	Logger func(level string, format string, args ...any)
}

func (c *Config) setDefaults() {
	if c.ReadBatchSize == 0 {
		c.ReadBatchSize = defaultReadBatchSize
	}
	if c.SubscriptionBuffer == 0 {
		c.SubscriptionBuffer = defaultSubscriptionBuffer
	}
	if c.MaxResubscribeAttempts == 0 {
		c.MaxResubscribeAttempts = defaultMaxResubscribeAttempts
	}
}

// Validate reports the first field out of range, by name. Zero values are valid: they take
// the default.
func (c Config) Validate() error {
	switch {
	case c.ReadBatchSize < 0:
		return fmt.Errorf("kurrent: ReadBatchSize %d: must be at least 1 (0 takes the default)", c.ReadBatchSize)
	case c.SubscriptionBuffer < 0:
		return fmt.Errorf("kurrent: SubscriptionBuffer %d: must not be negative", c.SubscriptionBuffer)
	}
	return validatePrefix(c.StreamPrefix)
}

const (
	defaultReadBatchSize          = 512
	defaultSubscriptionBuffer     = 256
	defaultMaxResubscribeAttempts = 8
	// closeWait bounds how long Close waits for operations still inside the client.
	closeWait = 10 * time.Second
)

// Store is an eventstore.Store on KurrentDB. It is safe for concurrent use.
type Store struct {
	conf        esdb.Configuration // copied into every client the store creates
	prefix      string
	batch       int
	buffer      int
	resubscribe int

	ctx    context.Context // cancelled by Close: ends every operation and subscription
	cancel context.CancelFunc

	mu     sync.Mutex
	client *esdb.Client
	closed bool
	ops    sync.WaitGroup // operations and subscriptions using a client
}

var _ eventstore.Store = (*Store)(nil)

// New connects to the KurrentDB server of connString (an esdb:// or esdb+discover:// connection
// string, e.g. "esdb://localhost:2113?tls=false") and checks it answers a read of $all, which
// subscriptions need. ctx bounds that first check.
func New(ctx context.Context, connString string, opts Config) (*Store, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	conf, err := esdb.ParseConnectionString(connString)
	if err != nil {
		return nil, fmt.Errorf("kurrent: parse connection string: %w", err)
	}
	if opts.Logger != nil {
		conf.Logger = opts.Logger
	} else {
		conf.Logger = esdb.NoopLogging()
	}
	s := &Store{
		conf:        *conf,
		prefix:      opts.StreamPrefix,
		batch:       opts.ReadBatchSize,
		buffer:      opts.SubscriptionBuffer,
		resubscribe: max(opts.MaxResubscribeAttempts, 0),
	}
	if s.client, err = s.newClient(); err != nil {
		return nil, fmt.Errorf("kurrent: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())

	// The client's first call discovers the node, which does not watch any context; run the check
	// aside so that ctx still bounds New.
	pinged := make(chan error, 1)
	go func() { pinged <- s.Ping(ctx) }()
	select {
	case err = <-pinged:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		go s.Close() // waits for the check still inside the client
		return nil, fmt.Errorf("kurrent: connect: %w", err)
	}
	return s, nil
}

func (s *Store) newClient() (*esdb.Client, error) {
	conf := s.conf
	return esdb.NewClient(&conf)
}

// op starts an operation: it returns the client to use, a context that Close also cancels, and the
// function that ends the operation.
func (s *Store) op(ctx context.Context) (*esdb.Client, context.Context, func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, nil, eventstore.ErrClosed
	}
	s.ops.Add(1)
	c := s.client
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return c, ctx, func() {
		stop()
		cancel()
		s.ops.Done()
	}, nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Store) currentClient() *esdb.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// renew replaces a client that has shut itself down. The esdb client gives up for good when a
// (re)discovery of the node fails: it marks itself closed, and every later call fails with
// ErrorCodeConnectionClosed, so without a new client the store would stay broken after an outage.
// The dead client is not Closed: its connection goroutine has already exited, and closing its request
// channel could panic a goroutine still sending on it.
func (s *Store) renew(dead *esdb.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.client != dead {
		return
	}
	if c, err := s.newClient(); err == nil { // the configuration was validated by New: no error in practice
		s.client = c
	}
}

// fail turns an error of client c during an operation into the store's: ErrClosed once the store is
// closed, the context's error when the caller gave up, otherwise the client's error, wrapped.
func (s *Store) fail(ctx context.Context, c *esdb.Client, what string, err error) error {
	if s.isClosed() {
		return eventstore.ErrClosed
	}
	if isCode(err, esdb.ErrorCodeConnectionClosed) {
		s.renew(c)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("kurrent: %s: %w", what, cerr)
	}
	return fmt.Errorf("kurrent: %s: %w", what, err)
}

// Append writes events to stream if expected holds. See the package documentation for idempotency.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := validateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	c, ctx, end, err := s.op(ctx)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	defer end()

	if n, exact := expected.ExactRevision(); len(events) == 0 || (exact && n > math.MaxInt64) {
		// Nothing to write, or a revision KurrentDB cannot represent (its revisions are int64): only
		// the expectation is checked, against the stream as it is now.
		return s.checkExpected(ctx, c, stream, expected)
	}

	proposed := make([]esdb.EventData, len(events))
	for i, e := range events {
		proposed[i] = esdb.EventData{
			EventID:     e.ID,
			EventType:   e.Type,
			ContentType: esdb.ContentTypeJson,
			Data:        e.Data,
			Metadata:    e.Metadata,
		}
	}
	wr, err := c.AppendToStream(ctx, serverStream(s.prefix, stream),
		esdb.AppendToStreamOptions{ExpectedRevision: toExpectedRevision(expected)}, proposed...)
	if err != nil {
		if isCode(err, esdb.ErrorCodeWrongExpectedVersion) {
			return eventstore.AppendResult{}, s.wrongVersion(ctx, c, stream, expected, events, err)
		}
		return eventstore.AppendResult{}, s.fail(ctx, c, "append to "+stream, err)
	}
	res := eventstore.AppendResult{
		NextRevision: wr.NextExpectedVersion,
		Position:     eventstore.Position{Commit: wr.CommitPosition, Prepare: wr.PreparePosition},
	}
	if len(events) > 1 && (expected.IsAny() || expected.IsStreamExists()) {
		// With Any or StreamExists the server's idempotency check is by event ID only: it accepts
		// IDs it finds in the stream in any order and at any revisions. Make sure the events are
		// where this append puts them, in order.
		return s.verifyAppended(ctx, c, stream, events, res.NextRevision)
	}
	if res.Position.IsStart() {
		// The server answered without a position (older servers do so for an idempotent append):
		// the last event's own record has it.
		ev, err := s.readOne(ctx, c, stream, res.NextRevision)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("kurrent: append to %s: locate revision %d: %w", stream, res.NextRevision, err)
		}
		res.Position = ev.Position
	}
	return res, nil
}

// checkExpected answers an append that writes nothing: it succeeds if expected holds for the stream
// as it is, reporting the stream's last event, and fails like a real append otherwise.
func (s *Store) checkExpected(ctx context.Context, c *esdb.Client, stream string, expected eventstore.ExpectedRevision) (eventstore.AppendResult, error) {
	last, found, err := s.lastEvent(ctx, c, stream)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if !holds(expected, last.Revision, found) {
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{
			Stream: stream, Expected: expected, Actual: last.Revision, HasActual: found,
		}
	}
	if !found {
		return eventstore.AppendResult{}, nil
	}
	return eventstore.AppendResult{NextRevision: last.Revision, Position: last.Position}, nil
}

// verifyAppended checks that events are the stream's events ending at revision last, in order, and
// returns where they are; ErrIdempotencyConflict if they are not (nothing was written then: a fresh
// write puts them exactly there).
func (s *Store) verifyAppended(ctx context.Context, c *esdb.Client, stream string, events []eventstore.EventData, last uint64) (eventstore.AppendResult, error) {
	k := uint64(len(events))
	if last+1 < k {
		return eventstore.AppendResult{}, fmt.Errorf("kurrent: append to %s: %w", stream, eventstore.ErrIdempotencyConflict)
	}
	got, err := s.readStream(ctx, c, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(last + 1 - k)}, k)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("kurrent: append to %s: verify: %w", stream, err)
	}
	if len(got) != len(events) {
		return eventstore.AppendResult{}, fmt.Errorf("kurrent: append to %s: %w", stream, eventstore.ErrIdempotencyConflict)
	}
	for i, e := range events {
		if got[i].ID != e.ID || got[i].Revision != last+1-k+uint64(i) {
			return eventstore.AppendResult{}, fmt.Errorf("kurrent: append to %s: %w", stream, eventstore.ErrIdempotencyConflict)
		}
	}
	return eventstore.AppendResult{NextRevision: last, Position: got[len(got)-1].Position}, nil
}

// validateAppend rejects appends KurrentDB would accept but the store could not honour: a nil event
// ID (the client would silently substitute a random one, defeating idempotency), the same ID twice in
// one append, and '$' streams or types, which reads treat as system events. An append of no events
// is valid: it checks the expectation only.
func validateAppend(stream string, events []eventstore.EventData) error {
	switch {
	case stream == "":
		return errors.New("kurrent: append: empty stream name")
	case isSystem(stream, ""):
		return fmt.Errorf("kurrent: append to %s: stream names starting with '$' are reserved for KurrentDB", stream)
	}
	seen := make(map[uuid.UUID]struct{}, len(events))
	for i, e := range events {
		switch {
		case e.ID == uuid.Nil:
			return fmt.Errorf("kurrent: append to %s: event %d has no ID", stream, i)
		case e.Type == "":
			return fmt.Errorf("kurrent: append to %s: event %d has no type", stream, i)
		case isSystem("", e.Type):
			return fmt.Errorf("kurrent: append to %s: event type %q starts with '$', reserved for KurrentDB", stream, e.Type)
		}
		if _, dup := seen[e.ID]; dup {
			return fmt.Errorf("kurrent: append to %s: event ID %s appears twice: %w", stream, e.ID, eventstore.ErrIdempotencyConflict)
		}
		seen[e.ID] = struct{}{}
	}
	return nil
}

// wrongVersion interprets the server's wrong-expected-version answer. KurrentDB gives the same answer
// for two different situations: the stream is not at the expected revision, or the append's first
// events are already in the stream where it would put them but the rest are not ("corrupted
// idempotency"). The first is a *WrongExpectedVersionError, the second ErrIdempotencyConflict:
//
//   - Any never conflicts on revision, so it can only be the second;
//   - StreamExists on an existing stream likewise;
//   - NoStream / Exact(n) on a stream that reaches past the expected revision is the second exactly
//     when the first appended event is the stream's event at revision n+1 (0 for NoStream); a single
//     event cannot be partly written, so that check is only needed for two or more.
func (s *Store) wrongVersion(ctx context.Context, c *esdb.Client, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData, cause error) error {
	actual, exists, known := parseActualRevision(cause)
	if !known {
		if last, found, err := s.lastEvent(ctx, c, stream); err == nil {
			actual, exists = last.Revision, found
		}
	}
	conflict := false
	switch {
	case expected.IsAny():
		conflict = true
	case expected.IsStreamExists():
		conflict = exists
	default:
		first := uint64(0)
		if n, ok := expected.ExactRevision(); ok {
			first = n + 1
		}
		if exists && actual >= first && len(events) > 1 {
			if ev, err := s.readOne(ctx, c, stream, first); err == nil && ev.ID == events[0].ID {
				conflict = true
			}
		}
	}
	if conflict {
		return fmt.Errorf("kurrent: append to %s: %w", stream, eventstore.ErrIdempotencyConflict)
	}
	return &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual, HasActual: exists}
}

// ReadStream returns up to max events of stream from revision from, in revision order.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.RecordedEvent, error) {
	if max <= 0 {
		return nil, nil
	}
	c, ctx, end, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if from > math.MaxInt64 {
		// Past any revision KurrentDB can hold (its revisions are int64): nothing to read, but a
		// missing stream is still reported as such.
		if _, found, err := s.lastEvent(ctx, c, stream); err != nil || !found {
			if err == nil {
				err = eventstore.ErrStreamNotFound
			}
			return nil, err
		}
		return nil, nil
	}
	return s.readStream(ctx, c, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(from)}, uint64(max))
}

func (s *Store) readStream(ctx context.Context, c *esdb.Client, stream string, opts esdb.ReadStreamOptions, count uint64) ([]eventstore.RecordedEvent, error) {
	rs, err := c.ReadStream(ctx, serverStream(s.prefix, stream), opts, count)
	if err != nil {
		return nil, s.fail(ctx, c, "read "+stream, err)
	}
	defer rs.Close()
	var out []eventstore.RecordedEvent
	for {
		re, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			// The server answers a read of a missing stream with a StreamNotFound message, which the
			// client turns into ErrorCodeResourceNotFound; a deleted stream reads as missing too.
			if isCode(err, esdb.ErrorCodeResourceNotFound) || isCode(err, esdb.ErrorCodeStreamDeleted) {
				return nil, eventstore.ErrStreamNotFound
			}
			return nil, s.fail(ctx, c, "read "+stream, err)
		}
		if ev := original(re); ev != nil {
			out = append(out, toRecorded(ev, stream))
		}
	}
}

var errRevisionNotFound = errors.New("revision not found")

// readOne reads the event of stream at revision rev.
func (s *Store) readOne(ctx context.Context, c *esdb.Client, stream string, rev uint64) (eventstore.RecordedEvent, error) {
	evs, err := s.readStream(ctx, c, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(rev)}, 1)
	if err != nil {
		return eventstore.RecordedEvent{}, err
	}
	if len(evs) == 0 || evs[0].Revision != rev {
		return eventstore.RecordedEvent{}, errRevisionNotFound
	}
	return evs[0], nil
}

// lastEvent returns the last event of stream; found is false for a missing stream.
func (s *Store) lastEvent(ctx context.Context, c *esdb.Client, stream string) (ev eventstore.RecordedEvent, found bool, err error) {
	evs, err := s.readStream(ctx, c, stream, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if errors.Is(err, eventstore.ErrStreamNotFound) {
		return eventstore.RecordedEvent{}, false, nil
	}
	if err != nil {
		return eventstore.RecordedEvent{}, false, err
	}
	if len(evs) == 0 {
		return eventstore.RecordedEvent{}, false, nil
	}
	return evs[0], true, nil
}

// ReadAll returns up to max events strictly after from that match filter, in position order.
//
// The esdb client (v4.2.0) offers no server-side filter on reads of $all, so this pages through $all
// forwards and filters on the client; a subscription filters on the server. A forward read from a
// position includes the event at that position, which is skipped.
func (s *Store) ReadAll(ctx context.Context, from eventstore.Position, max int, filter eventstore.Filter) ([]eventstore.RecordedEvent, error) {
	if max <= 0 {
		return nil, nil
	}
	c, ctx, end, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer end()

	page := s.batch
	if s.prefix == "" && len(filter.Categories) == 0 && len(filter.Types) == 0 {
		page = min(page, max+1) // +1: the event at from itself comes back first
	}
	var out []eventstore.RecordedEvent
	cursor := from
	for {
		rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Forwards, From: allFrom(cursor)}, uint64(page))
		if err != nil {
			return nil, s.fail(ctx, c, "read $all", err)
		}
		n, advanced := 0, false
		for {
			re, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rs.Close()
				return nil, s.fail(ctx, c, "read $all", err)
			}
			n++
			ev := original(re)
			if ev == nil {
				continue
			}
			pos := toPosition(ev.Position)
			if !after(cursor, pos) {
				continue
			}
			cursor, advanced = pos, true
			if rec, ok := decodeAll(s.prefix, ev); ok && filter.Matches(rec) {
				out = append(out, rec)
				if len(out) == max {
					rs.Close()
					return out, nil
				}
			}
		}
		rs.Close()
		if n < page || !advanced { // a short page is the end of the log
			return out, nil
		}
	}
}

// HeadPosition is the position of the last event of the store (of its prefix, if it has one) that
// is not a system event, or eventstore.Start when there is none. It reads $all backwards.
func (s *Store) HeadPosition(ctx context.Context) (eventstore.Position, error) {
	c, ctx, end, err := s.op(ctx)
	if err != nil {
		return eventstore.Position{}, err
	}
	defer end()

	page := s.batch
	if s.prefix == "" {
		page = min(page, 32) // only system events can come after the answer
	}
	var from esdb.AllPosition = esdb.End{}
	var cursor *eventstore.Position
	for {
		rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: from}, uint64(page))
		if err != nil {
			return eventstore.Position{}, s.fail(ctx, c, "read $all backwards", err)
		}
		n, advanced := 0, false
		for {
			re, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rs.Close()
				return eventstore.Position{}, s.fail(ctx, c, "read $all backwards", err)
			}
			n++
			ev := original(re)
			if ev == nil {
				continue
			}
			pos := toPosition(ev.Position)
			if cursor != nil && !pos.Less(*cursor) {
				continue // a backward read from a position must not return it; guard anyway
			}
			cursor, advanced = &pos, true
			if _, ok := decodeAll(s.prefix, ev); ok {
				rs.Close()
				return pos, nil
			}
		}
		rs.Close()
		if n < page || !advanced {
			return eventstore.Start, nil
		}
		from = fromPosition(*cursor)
	}
}

// Ping reads the last record of $all: it checks the node is reachable and that the credentials may
// read $all, which subscriptions need.
func (s *Store) Ping(ctx context.Context) error {
	c, ctx, end, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer end()
	rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err != nil {
		return s.fail(ctx, c, "ping", err)
	}
	defer rs.Close()
	if _, err := rs.Recv(); err != nil && !errors.Is(err, io.EOF) {
		return s.fail(ctx, c, "ping", err)
	}
	return nil
}

// Close ends every subscription and operation of the store and closes the connection. Later calls
// return eventstore.ErrClosed. If an operation is still stuck inside the client after a grace period
// (the client's node discovery does not watch contexts), Close returns an error and leaves the
// connection to be reclaimed at exit rather than risk closing it under that operation.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.client
	s.mu.Unlock()

	s.cancel()
	drained := make(chan struct{})
	go func() {
		s.ops.Wait()
		close(drained)
	}()
	timer := time.NewTimer(closeWait)
	defer timer.Stop()
	select {
	case <-drained:
		return c.Close()
	case <-timer.C:
		return fmt.Errorf("kurrent: close: operations still inside the client after %s; connection left open", closeWait)
	}
}

// original is the event a read or subscription delivered. Links are not resolved, so it is the
// recorded event itself (a link event, type "$>", in a system stream for links).
func original(re *esdb.ResolvedEvent) *esdb.RecordedEvent {
	if re == nil {
		return nil
	}
	return re.OriginalEvent()
}

// toRecorded converts a recorded event whose prefix-stripped stream name is stream.
func toRecorded(ev *esdb.RecordedEvent, stream string) eventstore.RecordedEvent {
	var meta []byte
	if len(ev.UserMetadata) > 0 {
		meta = ev.UserMetadata // the client sends nil metadata as empty bytes
	}
	return eventstore.RecordedEvent{
		ID:        ev.EventID,
		Stream:    stream,
		Revision:  ev.EventNumber,
		Type:      ev.EventType,
		Data:      ev.Data,
		Metadata:  meta,
		Position:  toPosition(ev.Position),
		CreatedAt: ev.CreatedDate,
	}
}

// decodeAll converts an event read from $all; ok is false for system events and for events outside
// the store's prefix.
func decodeAll(prefix string, ev *esdb.RecordedEvent) (eventstore.RecordedEvent, bool) {
	if ev == nil || isSystem(ev.StreamID, ev.EventType) {
		return eventstore.RecordedEvent{}, false
	}
	stream, ok := stripPrefix(prefix, ev.StreamID)
	if !ok {
		return eventstore.RecordedEvent{}, false
	}
	return toRecorded(ev, stream), true
}

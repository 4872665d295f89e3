// Package eventstore defines the append-only event log every Switchyard command writes to and
// every projection and reactor reads from. Backends live in subpackages (postgres, kurrent) and
// are held to one behaviour by the conformance suite in storetest.
package eventstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ErrWrongExpectedVersion is matched with errors.Is; the concrete error is *WrongExpectedVersionError.
var ErrWrongExpectedVersion = errors.New("wrong expected version")

// ErrStreamNotFound is returned by ReadStream for a stream with no events.
var ErrStreamNotFound = errors.New("stream not found")

// ErrIdempotencyConflict means some of the appended event IDs already exist, but not as the same
// events at the same revisions of this stream, so the append is neither new nor a safe repeat.
var ErrIdempotencyConflict = errors.New("event ids already used elsewhere")

// ErrClosed is returned by a store or subscription used after Close.
var ErrClosed = errors.New("event store closed")

// ErrUnstorable means the backend refused what an append's events hold (PostgreSQL's jsonb: a
// NUL character, a number beyond numeric, nesting past its stack): nothing was written, and
// the same events will never be. A multi-append's caller can write its parts one by one to
// find the part at fault.
var ErrUnstorable = errors.New("event data the store cannot hold")

// WrongExpectedVersionError carries the stream's actual revision so callers can decide whether
// to reload and retry.
type WrongExpectedVersionError struct {
	Stream   string
	Expected ExpectedRevision
	// Actual is the stream's current revision; HasActual is false when the stream does not exist.
	Actual    uint64
	HasActual bool
}

func (e *WrongExpectedVersionError) Error() string {
	actual := "no stream"
	if e.HasActual {
		actual = strconv.FormatUint(e.Actual, 10)
	}
	return fmt.Sprintf("append to %s: expected %s, actual %s: %v", e.Stream, e.Expected, actual, ErrWrongExpectedVersion)
}

// Unwrap lets errors.Is(err, ErrWrongExpectedVersion) match.
func (e *WrongExpectedVersionError) Unwrap() error { return ErrWrongExpectedVersion }

type expectedKind uint8

const (
	kindAny expectedKind = iota
	kindNoStream
	kindStreamExists
	kindExact
)

// ExpectedRevision is the optimistic-concurrency condition of an append.
type ExpectedRevision struct {
	kind     expectedKind
	revision uint64
}

// Any appends whatever the stream's state.
func Any() ExpectedRevision { return ExpectedRevision{kind: kindAny} }

// NoStream appends only if the stream has no events yet.
func NoStream() ExpectedRevision { return ExpectedRevision{kind: kindNoStream} }

// StreamExists appends only if the stream has at least one event.
func StreamExists() ExpectedRevision { return ExpectedRevision{kind: kindStreamExists} }

// Exact appends only if the stream's last event is at revision n (revisions start at 0).
func Exact(n uint64) ExpectedRevision { return ExpectedRevision{kind: kindExact, revision: n} }

// IsAny reports whether e is Any().
func (e ExpectedRevision) IsAny() bool { return e.kind == kindAny }

// IsNoStream reports whether e is NoStream().
func (e ExpectedRevision) IsNoStream() bool { return e.kind == kindNoStream }

// IsStreamExists reports whether e is StreamExists().
func (e ExpectedRevision) IsStreamExists() bool { return e.kind == kindStreamExists }

// ExactRevision returns the revision of an Exact expectation.
func (e ExpectedRevision) ExactRevision() (uint64, bool) { return e.revision, e.kind == kindExact }

func (e ExpectedRevision) String() string {
	switch e.kind {
	case kindNoStream:
		return "no stream"
	case kindStreamExists:
		return "stream exists"
	case kindExact:
		return strconv.FormatUint(e.revision, 10)
	default:
		return "any"
	}
}

// Position is a place in the global log. Positions are totally ordered by (Commit, Prepare).
// Their values are backend-specific and opaque: Postgres uses (transaction id, sequence),
// KurrentDB its commit and prepare positions.
type Position struct {
	Commit  uint64
	Prepare uint64
}

// Start is the position before the first event: subscribing from it delivers the whole log.
var Start = Position{}

// Less reports whether p comes strictly before q.
func (p Position) Less(q Position) bool {
	if p.Commit != q.Commit {
		return p.Commit < q.Commit
	}
	return p.Prepare < q.Prepare
}

// IsStart reports whether p is the start of the log.
func (p Position) IsStart() bool { return p == Start }

// String renders the position as "commit/prepare", the form ParsePosition reads.
func (p Position) String() string {
	return strconv.FormatUint(p.Commit, 10) + "/" + strconv.FormatUint(p.Prepare, 10)
}

// ParsePosition reads the form written by Position.String.
func ParsePosition(s string) (Position, error) {
	c, pr, ok := strings.Cut(s, "/")
	if !ok {
		return Position{}, fmt.Errorf("parse position %q: want commit/prepare", s)
	}
	commit, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("parse position %q: %w", s, err)
	}
	prepare, err := strconv.ParseUint(pr, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("parse position %q: %w", s, err)
	}
	return Position{Commit: commit, Prepare: prepare}, nil
}

// EventData is an event to append. ID is chosen by the writer; derive it deterministically
// (uuid.NewSHA1 of the cause) wherever a retry could append the same fact twice.
type EventData struct {
	ID       uuid.UUID
	Type     string
	Data     []byte // JSON
	Metadata []byte // JSON or nil
}

// RecordedEvent is an event as stored.
type RecordedEvent struct {
	ID        uuid.UUID
	Stream    string
	Revision  uint64
	Type      string
	Data      []byte
	Metadata  []byte
	Position  Position
	CreatedAt time.Time
}

// Category returns the part of the stream name before the first '-'.
func (e RecordedEvent) Category() string { return Category(e.Stream) }

// Category returns the part of a stream name before the first '-' ("execution-<id>" -> "execution").
func Category(stream string) string {
	c, _, _ := strings.Cut(stream, "-")
	return c
}

// StreamName joins a category and an id into a stream name.
func StreamName(category, id string) string { return category + "-" + id }

// AppendResult tells where an append landed.
type AppendResult struct {
	// NextRevision is the revision of the last event now in the stream.
	NextRevision uint64
	// Position is the log position of the last appended event.
	Position Position
}

// StreamAppend is one stream's part of an AppendMulti.
type StreamAppend struct {
	Stream   string
	Expected ExpectedRevision
	Events   []EventData
	// Claims are taken in the same commit as the events, on a store that takes claims
	// (ClaimStore); a store that does not refuses a part carrying any (ErrClaimsUnsupported).
	Claims []Claim
}

// Claim is a use-once key that an append takes together with its events. The SDK keys a
// signed request's claim by its signature, so that the request's effect and the proof that the
// signature has been used commit together, or neither does (docs/executions.md, "Replays").
type Claim struct {
	// Key is opaque to the store (the SHA-256 of a request signature).
	Key []byte
	// Owner is who takes the key: taking it again under the same owner succeeds, so one
	// request may claim its key on more than one path without refusing itself.
	Owner []byte
	// Until is when the claim lapses: after it, another owner may take the key.
	Until time.Time
}

// ErrClaimed is matched with errors.Is; the concrete error is *ClaimedError.
var ErrClaimed = errors.New("key claimed by another owner")

// ErrClaimsUnsupported is returned for an append carrying claims to a store that takes none.
var ErrClaimsUnsupported = errors.New("event store takes no claims")

// ClaimedError refuses a whole AppendMulti: some part's claim key is held, until it lapses, by
// another owner than the part's. Nothing was written.
type ClaimedError struct {
	Key, Holder []byte
}

func (e *ClaimedError) Error() string {
	return fmt.Sprintf("eventstore: key %x: %v", e.Key, ErrClaimed)
}

func (e *ClaimedError) Unwrap() error { return ErrClaimed }

// Refuses reports whether e refuses the claim c: c is for the held key under another owner.
func (e *ClaimedError) Refuses(c Claim) bool {
	return bytes.Equal(c.Key, e.Key) && !bytes.Equal(c.Owner, e.Holder)
}

// ClaimStore is a Store whose AppendMulti (and its turns') takes StreamAppend.Claims.
type ClaimStore interface {
	Store
	// TakesClaims reports true; it marks the capability.
	TakesClaims() bool
}

// Filter selects events of a subscription or log read. The zero Filter selects every event.
// When both lists are set an event must match both.
type Filter struct {
	Categories []string
	Types      []string
}

// Matches reports whether e passes the filter.
func (f Filter) Matches(e RecordedEvent) bool {
	return (len(f.Categories) == 0 || contains(f.Categories, e.Category())) &&
		(len(f.Types) == 0 || contains(f.Types, e.Type))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Store is the event log. Implementations are safe for concurrent use.
type Store interface {
	// Append writes events to stream if expected holds, all or nothing. Appending event IDs that
	// are already the stream's events at the revisions this append would give them succeeds
	// without writing (idempotent retry) and reports where they are.
	Append(ctx context.Context, stream string, expected ExpectedRevision, events ...EventData) (AppendResult, error)
	// AppendMulti appends to several streams in one call and returns one result per part, in
	// the order given. Each part keeps Append's rules (expectation, idempotent repeat). The
	// Postgres backend makes the call atomic: if any part fails nothing is written, and an
	// expectation failure is a *WrongExpectedVersionError naming that part's stream. Backends
	// that cannot be atomic say what they guarantee (docs/kurrentdb.md). A part without
	// events checks its expectation only (a trigger's workflow); where the call is atomic, what
	// it checked still holds when the call commits.
	AppendMulti(ctx context.Context, appends ...StreamAppend) ([]AppendResult, error)
	// ReadStream returns up to max events of stream starting at revision from, in revision order.
	// A stream with no events read from revision 0 gives ErrStreamNotFound; read from a later
	// revision, an unknown stream gives ErrStreamNotFound or no events, as the backend finds cheaper.
	ReadStream(ctx context.Context, stream string, from uint64, max int) ([]RecordedEvent, error)
	// ReadAll returns up to max events strictly after position from, in position order, that
	// match filter. Only events that a subscription may deliver are returned: an event is never
	// returned after one with a greater position has been.
	ReadAll(ctx context.Context, from Position, max int, filter Filter) ([]RecordedEvent, error)
	// Subscribe delivers every event strictly after from that matches filter, in position order:
	// first the stored ones (catch-up), then new ones as they commit (live).
	Subscribe(ctx context.Context, from Position, filter Filter) (Subscription, error)
	// HeadPosition is the position of the last event a subscription can deliver now.
	HeadPosition(ctx context.Context) (Position, error)
	// Ping checks the backend is reachable.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// Subscription is a live feed of events. Events is closed when the subscription ends; Err then
// tells why (nil after Close or context cancellation).
type Subscription interface {
	Events() <-chan RecordedEvent
	Err() error
	Close()
}

// Progress is implemented by a Subscription that can tell how far it has read the log, matches
// or not: a consumer of a sparse filter may then record that it has seen the log up to there,
// and a later subscription from that position need not read it all again.
type Progress interface {
	// Scanned is a position up to which every event the filter selects has been sent on
	// Events (the zero Position before the first read). Subscribing from it later delivers
	// exactly the selected events after it.
	Scanned() Position
}

// StreamTurns is implemented by a store whose writers of one stream can take turns across
// processes. Writers that keep losing the race for one hot stream (several instances charging
// one workspace's account) read on, decide and append within a turn that holds the stream's
// lock, instead of deciding on a revision another process has moved on meanwhile and being
// refused. The lock is advisory: appends outside turns do not take it, and every append's
// expectation still guards the stream.
type StreamTurns interface {
	// TakeTurn waits for stream's lock as long as ctx lasts, then reads the stream's events
	// from revision from on. The lock is held until the turn ends (Turn.AppendMulti or
	// Turn.End), or the process that holds it dies.
	TakeTurn(ctx context.Context, stream string, from uint64) (Turn, error)
}

// StreamsTurns is implemented by a store whose turns can cover several streams at once: one
// writer charging many workspaces that another process charges too takes one turn on all
// their accounts and writes their batches in one commit, where a turn apiece cost a commit
// and two round trips each.
type StreamsTurns interface {
	// TakeTurns is TakeTurn on every stream of from at once, each read on from its revision.
	// The locks are taken in one order in every process, so two turns never wait for each
	// other in a cycle.
	TakeTurns(ctx context.Context, from map[string]uint64) (Turns, error)
}

// Turns is one writer's turn on several streams (StreamsTurns). It is used by one goroutine.
type Turns interface {
	// EventsOf are stream's events from the revision the turn was taken at, read under the
	// lock; none for a stream the turn was not taken on.
	EventsOf(stream string) []RecordedEvent
	// AppendMulti is Store.AppendMulti within the turn, and ends it whatever its outcome.
	AppendMulti(ctx context.Context, appends ...StreamAppend) ([]AppendResult, error)
	// End ends the turn without appending; after AppendMulti it does nothing.
	End()
}

// Turn is one writer's turn on a stream (StreamTurns). It is used by one goroutine.
type Turn interface {
	// Events are the stream's events from the revision the turn was taken at, read under the
	// lock: none when the stream does not exist or has nothing new.
	Events() []RecordedEvent
	// AppendMulti is Store.AppendMulti within the turn, and ends it whatever its outcome.
	AppendMulti(ctx context.Context, appends ...StreamAppend) ([]AppendResult, error)
	// End ends the turn without appending; after AppendMulti it does nothing.
	End()
}

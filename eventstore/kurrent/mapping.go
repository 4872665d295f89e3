package kurrent

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchyard/switchyard/eventstore"
)

// This file holds the pure translations between the eventstore types and the esdb client's:
// they need no server and are unit-tested in mapping_test.go.

// toExpectedRevision maps an eventstore expectation onto the client's.
func toExpectedRevision(e eventstore.ExpectedRevision) esdb.ExpectedRevision {
	switch {
	case e.IsNoStream():
		return esdb.NoStream{}
	case e.IsStreamExists():
		return esdb.StreamExists{}
	}
	if n, ok := e.ExactRevision(); ok {
		return esdb.Revision(n)
	}
	return esdb.Any{}
}

// holds reports whether expected is met by a stream whose last revision is last (found false: the
// stream has no events).
func holds(expected eventstore.ExpectedRevision, last uint64, found bool) bool {
	switch {
	case expected.IsAny():
		return true
	case expected.IsNoStream():
		return !found
	case expected.IsStreamExists():
		return found
	}
	n, _ := expected.ExactRevision()
	return found && last == n
}

// unknownCommit is how a server that does not know where an event was committed reports its commit
// position (-1 on the server, carried as an unsigned 64-bit value).
const unknownCommit = math.MaxUint64

// toPosition maps a KurrentDB log position onto an eventstore one: both are (commit, prepare).
//
// $all reads and subscriptions always carry both. Reads of a stream may not know the commit
// position (older servers report it as -1). Every event appended through the gRPC API commits
// itself, at its own record: its position in $all is (prepare, prepare), which is what newer
// servers report for stream reads, so an unknown commit position is taken to be the prepare one.
func toPosition(p esdb.Position) eventstore.Position {
	if p.Commit == unknownCommit && p.Prepare != unknownCommit {
		p.Commit = p.Prepare
	}
	return eventstore.Position{Commit: p.Commit, Prepare: p.Prepare}
}

// fromPosition maps an eventstore position onto the client's.
func fromPosition(p eventstore.Position) esdb.Position {
	return esdb.Position{Commit: p.Commit, Prepare: p.Prepare}
}

// allFrom is where a forward read or subscription of $all starts for "strictly after p": the log's
// start for eventstore.Start, otherwise p itself. A forward read of $all from a position includes the
// event at that position, so readers must still drop events that are not after p (see after).
// Subscriptions from a position are exclusive on the server; the same check is kept there as a guard.
func allFrom(p eventstore.Position) esdb.AllPosition {
	if p.IsStart() {
		return esdb.Start{}
	}
	return fromPosition(p)
}

// after reports whether an event at position p comes strictly after from. Every event comes after
// Start, including one at the log's very first position (0/0).
func after(from, p eventstore.Position) bool {
	return from.IsStart() || from.Less(p)
}

// isSystem reports whether an event belongs to KurrentDB itself: system streams ($stats-..., $$meta,
// $ce-... link streams) and system event types ($metadata, $>, $streamDeleted, ...) start with '$'.
func isSystem(stream, eventType string) bool {
	return strings.HasPrefix(stream, "$") || strings.HasPrefix(eventType, "$")
}

// serverStream is the name a stream has on the server: the store's prefix, then the stream.
func serverStream(prefix, stream string) string { return prefix + stream }

// stripPrefix turns a server stream name back into the caller's name. ok is false for streams
// outside the prefix (another store's, or nothing of Switchyard's at all).
func stripPrefix(prefix, serverName string) (stream string, ok bool) {
	if !strings.HasPrefix(serverName, prefix) {
		return "", false
	}
	stream = serverName[len(prefix):]
	return stream, stream != ""
}

// validatePrefix rejects prefixes that would put the store's streams among the system streams.
func validatePrefix(prefix string) error {
	if strings.HasPrefix(prefix, "$") {
		return fmt.Errorf("kurrent: StreamPrefix %q starts with '$', which KurrentDB reserves for system streams", prefix)
	}
	return nil
}

// typesRegex is an anchored regular expression matching exactly the given event types. The server
// evaluates it with .NET regular expressions; regexp.QuoteMeta escapes only punctuation, which .NET
// reads as literals too.
func typesRegex(types []string) string {
	quoted := make([]string, 0, len(types))
	for _, t := range dedupe(types) {
		quoted = append(quoted, regexp.QuoteMeta(t))
	}
	return "^(?:" + strings.Join(quoted, "|") + ")$"
}

// subscriptionFilter builds the server-side filter of a subscription to $all. A KurrentDB filter
// tests either the stream name or the event type, by prefixes or by one regular expression, never
// both at once, so it is chosen by selectivity and whatever it cannot express is left to the
// client-side check (Store.decode + Filter.Matches), which is applied to every delivered event:
//
//   - categories set: stream-name prefixes "<prefix><category>-" (event types checked client-side);
//   - a store prefix but no categories: the stream-name prefix alone (types checked client-side);
//   - only types: an anchored event-type regex, which cannot match a '$' system type;
//   - nothing: the client's ExcludeSystemEventsFilter (event types not starting with '$').
//
// Every variant excludes system events: stream prefixes never start with '$' (validatePrefix) and
// neither do the Switchyard categories and types; the client-side check drops any that slip through.
func subscriptionFilter(prefix string, f eventstore.Filter) *esdb.SubscriptionFilter {
	switch {
	case len(f.Categories) > 0:
		prefixes := make([]string, 0, len(f.Categories))
		for _, c := range dedupe(f.Categories) {
			prefixes = append(prefixes, serverStream(prefix, c+"-"))
		}
		return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: prefixes}
	case prefix != "":
		return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{prefix}}
	case len(f.Types) > 0:
		return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Regex: typesRegex(f.Types)}
	default:
		return esdb.ExcludeSystemEventsFilter()
	}
}

func dedupe(list []string) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// esdbCode returns the client's error code of err, if err is (or wraps) an *esdb.Error.
func esdbCode(err error) (esdb.ErrorCode, bool) {
	var e *esdb.Error
	if errors.As(err, &e) {
		return e.Code(), true
	}
	return 0, false
}

func isCode(err error, code esdb.ErrorCode) bool {
	c, ok := esdbCode(err)
	return ok && c == code
}

// wrongVersionActual matches the client's rendering of a wrong-expected-version append result
// (esdb/client.go: "wrong expected version: expecting '%s' but got '%s'"), whose second value is
// "no_stream" or the stream's current revision.
var wrongVersionActual = regexp.MustCompile(`but got '([^']*)'`)

// parseActualRevision extracts the stream's current revision from the client's wrong-expected-version
// error. known is false when the error does not carry a usable value; exists is false when the server
// reported that the stream does not exist.
func parseActualRevision(err error) (actual uint64, exists, known bool) {
	var e *esdb.Error
	if !errors.As(err, &e) || e.Code() != esdb.ErrorCodeWrongExpectedVersion || e.Err() == nil {
		return 0, false, false
	}
	return parseActualMessage(e.Err().Error())
}

// parseActualMessage reads the current revision out of the client's wrong-expected-version message.
func parseActualMessage(msg string) (actual uint64, exists, known bool) {
	m := wrongVersionActual.FindStringSubmatch(msg)
	if m == nil {
		return 0, false, false
	}
	if m[1] == "no_stream" {
		return 0, false, true
	}
	// The client renders the revision with strconv.Itoa(int(rev)); a value past MaxInt64 would come
	// out negative and is reported as unknown here.
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return 0, false, false
	}
	return n, true, true
}

// retryable reports whether a dropped subscription (or a failed attempt to resubscribe) is worth
// retrying from the last delivered position: connection loss, leader changes, server restarts and
// aborts are; bad requests and authorisation failures are not.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	if c, ok := esdbCode(err); ok {
		switch c {
		case esdb.ErrorUnavailable, esdb.ErrorAborted, esdb.ErrorCodeDeadlineExceeded,
			esdb.ErrorCodeNotLeader, esdb.ErrorCodeConnectionClosed:
			return true
		case esdb.ErrorCodeUnknown, esdb.ErrorCodeInternalServer:
			// The gRPC status (if any) tells more; fall through.
		default:
			return false
		}
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated:
		return false
	}
	return true
}

package kurrent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchyard/switchyard/eventstore"
)

// These tests need no server: they cover the translations between the eventstore types and the
// esdb client's, and the store's input checks.

func TestToExpectedRevision(t *testing.T) {
	tests := []struct {
		in   eventstore.ExpectedRevision
		want esdb.ExpectedRevision
	}{
		{eventstore.Any(), esdb.Any{}},
		{eventstore.NoStream(), esdb.NoStream{}},
		{eventstore.StreamExists(), esdb.StreamExists{}},
		{eventstore.Exact(0), esdb.StreamRevision{Value: 0}},
		{eventstore.Exact(41), esdb.Revision(41)},
		{eventstore.ExpectedRevision{}, esdb.Any{}}, // the zero value is Any
	}
	for _, tt := range tests {
		if got := toExpectedRevision(tt.in); got != tt.want {
			t.Errorf("toExpectedRevision(%s) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

func TestPositionMapping(t *testing.T) {
	p := esdb.Position{Commit: 1234, Prepare: 1200}
	got := toPosition(p)
	if got != (eventstore.Position{Commit: 1234, Prepare: 1200}) {
		t.Fatalf("toPosition(%v) = %v", p, got)
	}
	if back := fromPosition(got); back != p {
		t.Fatalf("fromPosition(%v) = %v, want %v", got, back, p)
	}
	if _, ok := allFrom(eventstore.Start).(esdb.Start); !ok {
		t.Errorf("allFrom(Start) = %#v, want esdb.Start{}", allFrom(eventstore.Start))
	}
	if got := allFrom(eventstore.Position{Commit: 7, Prepare: 7}); got != (esdb.Position{Commit: 7, Prepare: 7}) {
		t.Errorf("allFrom(7/7) = %#v", got)
	}
	// KurrentDB orders positions by commit, then prepare; so does eventstore.Position.Less.
	if !toPosition(esdb.Position{Commit: 10, Prepare: 99}).Less(toPosition(esdb.Position{Commit: 11, Prepare: 0})) {
		t.Error("commit position must dominate the order")
	}
}

func TestPositionUnknownCommit(t *testing.T) {
	// A stream read on a server that does not know an event's commit position reports -1, carried
	// as the largest uint64: the event committed itself, at its prepare position.
	got := toPosition(esdb.Position{Commit: math.MaxUint64, Prepare: 4711})
	if got != (eventstore.Position{Commit: 4711, Prepare: 4711}) {
		t.Fatalf("toPosition(unknown commit) = %v", got)
	}
	end := esdb.Position{Commit: math.MaxUint64, Prepare: math.MaxUint64}
	if got := toPosition(end); got != (eventstore.Position{Commit: math.MaxUint64, Prepare: math.MaxUint64}) {
		t.Fatalf("toPosition(end) = %v", got)
	}
}

func TestHolds(t *testing.T) {
	tests := []struct {
		expected eventstore.ExpectedRevision
		last     uint64
		found    bool
		want     bool
	}{
		{eventstore.Any(), 0, false, true},
		{eventstore.Any(), 3, true, true},
		{eventstore.NoStream(), 0, false, true},
		{eventstore.NoStream(), 0, true, false},
		{eventstore.StreamExists(), 0, false, false},
		{eventstore.StreamExists(), 0, true, true},
		{eventstore.Exact(0), 0, false, false}, // revision 0 is the first event, not "no stream"
		{eventstore.Exact(0), 0, true, true},
		{eventstore.Exact(1), 2, true, false},
		{eventstore.Exact(2), 1, true, false},
	}
	for _, tt := range tests {
		if got := holds(tt.expected, tt.last, tt.found); got != tt.want {
			t.Errorf("holds(%s, %d, found %v) = %v, want %v", tt.expected, tt.last, tt.found, got, tt.want)
		}
	}
}

func TestAfter(t *testing.T) {
	p := func(c, pr uint64) eventstore.Position { return eventstore.Position{Commit: c, Prepare: pr} }
	tests := []struct {
		from, at eventstore.Position
		want     bool
	}{
		{eventstore.Start, p(0, 0), true}, // everything is after Start, even the first record
		{eventstore.Start, p(5, 5), true},
		{p(5, 5), p(5, 5), false}, // a read from a position includes it: skip it
		{p(5, 5), p(4, 4), false},
		{p(5, 5), p(5, 6), true},
		{p(5, 5), p(6, 0), true},
	}
	for _, tt := range tests {
		if got := after(tt.from, tt.at); got != tt.want {
			t.Errorf("after(%v, %v) = %v, want %v", tt.from, tt.at, got, tt.want)
		}
	}
}

func TestStreamPrefix(t *testing.T) {
	if got := serverStream("t1_", "execution-42"); got != "t1_execution-42" {
		t.Errorf("serverStream = %q", got)
	}
	if got := serverStream("", "execution-42"); got != "execution-42" {
		t.Errorf("serverStream without prefix = %q", got)
	}
	tests := []struct {
		prefix, name, want string
		ok                 bool
	}{
		{"t1_", "t1_execution-42", "execution-42", true},
		{"t1_", "t2_execution-42", "", false},
		{"t1_", "execution-42", "", false},
		{"t1_", "t1_", "", false}, // nothing left: not a stream of ours
		{"", "execution-42", "execution-42", true},
		{"", "$stats-0.0.0.0:2113", "$stats-0.0.0.0:2113", true}, // system streams are dropped by isSystem
	}
	for _, tt := range tests {
		got, ok := stripPrefix(tt.prefix, tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("stripPrefix(%q, %q) = %q, %v; want %q, %v", tt.prefix, tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if err := validatePrefix("$x"); err == nil {
		t.Error("validatePrefix accepted a '$' prefix")
	}
	for _, ok := range []string{"", "storetest_ab12_", "staging."} {
		if err := validatePrefix(ok); err != nil {
			t.Errorf("validatePrefix(%q) = %v", ok, err)
		}
	}
}

func TestIsSystem(t *testing.T) {
	tests := []struct {
		stream, typ string
		want        bool
	}{
		{"execution-1", "ExecutionSubmitted", false},
		{"$stats-127.0.0.1:2113", "$statsCollected", true},
		{"$$execution-1", "$metadata", true},
		{"$ce-execution", "$>", true},
		{"execution-1", "$>", true},
		{"$scavenges", "ScavengeStarted", true},
	}
	for _, tt := range tests {
		if got := isSystem(tt.stream, tt.typ); got != tt.want {
			t.Errorf("isSystem(%q, %q) = %v, want %v", tt.stream, tt.typ, got, tt.want)
		}
	}
}

func TestTypesRegex(t *testing.T) {
	re := regexp.MustCompile(typesRegex([]string{"ExecutionSubmitted", "Run.Started", "ExecutionSubmitted"}))
	for typ, want := range map[string]bool{
		"ExecutionSubmitted":       true,
		"Run.Started":              true,
		"RunxStarted":              false, // '.' is escaped
		"ExecutionSubmittedLater":  false, // anchored at the end
		"OldExecutionSubmitted":    false, // anchored at the start
		"$ExecutionSubmitted":      false,
		"$metadata":                false,
		"":                         false,
		"ExecutionSubmitted|Other": false,
	} {
		if got := re.MatchString(typ); got != want {
			t.Errorf("typesRegex matches %q = %v, want %v", typ, got, want)
		}
	}
	if got := typesRegex([]string{"A", "B"}); got != "^(?:A|B)$" {
		t.Errorf("typesRegex = %q", got)
	}
}

func TestSubscriptionFilter(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		filter eventstore.Filter
		want   *esdb.SubscriptionFilter
	}{
		{
			name: "nothing: exclude system events",
			want: esdb.ExcludeSystemEventsFilter(),
		},
		{
			name:   "categories: stream prefixes",
			filter: eventstore.Filter{Categories: []string{"execution", "run", "execution"}},
			want:   &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"execution-", "run-"}},
		},
		{
			name:   "categories and types: stream prefixes, types on the client",
			filter: eventstore.Filter{Categories: []string{"billing"}, Types: []string{"Charged"}},
			want:   &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"billing-"}},
		},
		{
			name:   "categories under a store prefix",
			prefix: "t9_",
			filter: eventstore.Filter{Categories: []string{"execution"}},
			want:   &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"t9_execution-"}},
		},
		{
			name:   "types only: anchored type regex",
			filter: eventstore.Filter{Types: []string{"Charged", "Refunded"}},
			want:   &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Regex: "^(?:Charged|Refunded)$"},
		},
		{
			name:   "store prefix only",
			prefix: "t9_",
			want:   &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"t9_"}},
		},
		{
			name:   "store prefix and types: prefix on the server, types on the client",
			prefix: "t9_",
			filter: eventstore.Filter{Types: []string{"Charged"}},
			want:   &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"t9_"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := subscriptionFilter(tt.prefix, tt.filter)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("subscriptionFilter = %#v, want %#v", got, tt.want)
			}
			// The client refuses a filter with both or neither of prefixes and regex
			// (esdb/protobuf_utils.go toFilterOptions).
			if (len(got.Prefixes) > 0) == (got.Regex != "") {
				t.Fatalf("filter must have prefixes or a regex, not both: %#v", got)
			}
		})
	}
	// The default filter is the client's own system-event exclusion.
	re := regexp.MustCompile(esdb.ExcludeSystemEventsFilter().Regex)
	if re.MatchString("$statsCollected") || !re.MatchString("ExecutionSubmitted") {
		t.Error("ExcludeSystemEventsFilter does not exclude '$' types only")
	}
}

func TestDecodeAll(t *testing.T) {
	id := uuid.New()
	created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := &esdb.RecordedEvent{
		EventID:      id,
		EventType:    "ExecutionSubmitted",
		StreamID:     "t1_execution-42",
		EventNumber:  3,
		Position:     esdb.Position{Commit: 900, Prepare: 900},
		CreatedDate:  created,
		Data:         []byte(`{"a":1}`),
		UserMetadata: []byte{},
	}
	got, ok := decodeAll("t1_", ev)
	if !ok {
		t.Fatal("decodeAll dropped an event of the store")
	}
	want := eventstore.RecordedEvent{
		ID: id, Stream: "execution-42", Revision: 3, Type: "ExecutionSubmitted",
		Data: []byte(`{"a":1}`), Metadata: nil, Position: eventstore.Position{Commit: 900, Prepare: 900}, CreatedAt: created,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeAll = %#v\nwant %#v", got, want)
	}
	if got.Category() != "execution" {
		t.Errorf("category of the stripped stream = %q", got.Category())
	}

	ev.UserMetadata = []byte(`{"m":true}`)
	if got, _ := decodeAll("t1_", ev); string(got.Metadata) != `{"m":true}` {
		t.Errorf("metadata = %q", got.Metadata)
	}
	for _, drop := range []*esdb.RecordedEvent{
		nil,
		{StreamID: "t2_execution-42", EventType: "ExecutionSubmitted"},
		{StreamID: "$stats-node", EventType: "$statsCollected"},
		{StreamID: "$ce-execution", EventType: "$>"},
		{StreamID: "t1_execution-42", EventType: "$metadata"},
	} {
		if _, ok := decodeAll("t1_", drop); ok {
			t.Errorf("decodeAll kept %#v", drop)
		}
	}
	if _, ok := decodeAll("", &esdb.RecordedEvent{StreamID: "$scavenges", EventType: "x"}); ok {
		t.Error("decodeAll kept a system stream")
	}
}

func TestParseActualMessage(t *testing.T) {
	// The client formats the result as in esdb/client.go (AppendToStream):
	//   fmt.Errorf("wrong expected version: expecting '%s' but got '%s'", expected, current)
	// with current "no_stream" or strconv.Itoa(int(revision)).
	msg := func(expected, current string) string {
		return fmt.Sprintf("wrong expected version: expecting '%s' but got '%s'", expected, current)
	}
	tests := []struct {
		msg           string
		actual        uint64
		exists, known bool
	}{
		{msg("no_stream", "4"), 4, true, true},
		{msg("2", "0"), 0, true, true},
		{msg("stream_exists", "no_stream"), 0, false, true},
		{msg("any", "-1"), 0, false, false},
		{"something else entirely", 0, false, false},
	}
	for _, tt := range tests {
		actual, exists, known := parseActualMessage(tt.msg)
		if actual != tt.actual || exists != tt.exists || known != tt.known {
			t.Errorf("parseActualMessage(%q) = %d, %v, %v; want %d, %v, %v", tt.msg, actual, exists, known, tt.actual, tt.exists, tt.known)
		}
	}
	// Only the client's wrong-expected-version error is parsed.
	if _, _, known := parseActualRevision(errors.New(msg("1", "3"))); known {
		t.Error("parseActualRevision parsed a plain error")
	}
}

func TestRetryable(t *testing.T) {
	wrap := func(c codes.Code) error {
		e, _ := esdb.FromError(status.Error(c, "x")) // what the client does with an unclassified error
		return e
	}
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{wrap(codes.Unavailable), true},
		{status.Error(codes.Aborted, "x"), true},
		{status.Error(codes.Internal, "RST_STREAM"), true},
		{errors.New("subscription has been dropped"), true},
		{status.Error(codes.PermissionDenied, "x"), false},
		{wrap(codes.Unauthenticated), false},
		{status.Error(codes.InvalidArgument, "bad regex"), false},
		{fmt.Errorf("wrapped: %w", status.Error(codes.FailedPrecondition, "x")), false},
	}
	for _, tt := range tests {
		if got := retryable(tt.err); got != tt.want {
			t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestValidateAppend(t *testing.T) {
	ev := func(typ string) eventstore.EventData {
		return eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte(`{}`)}
	}
	dup := ev("A")
	tests := []struct {
		name     string
		stream   string
		events   []eventstore.EventData
		ok       bool
		conflict bool
	}{
		{"fine", "execution-1", []eventstore.EventData{ev("A"), ev("B")}, true, false},
		{"empty stream", "", []eventstore.EventData{ev("A")}, false, false},
		{"system stream", "$execution-1", []eventstore.EventData{ev("A")}, false, false},
		{"no events: a check of the expectation only", "execution-1", nil, true, false},
		{"nil id", "execution-1", []eventstore.EventData{{Type: "A"}}, false, false},
		{"no type", "execution-1", []eventstore.EventData{{ID: uuid.New()}}, false, false},
		{"system type", "execution-1", []eventstore.EventData{ev("$metadata")}, false, false},
		{"same id twice", "execution-1", []eventstore.EventData{dup, dup}, false, true},
	}
	for _, tt := range tests {
		err := validateAppend(tt.stream, tt.events)
		if (err == nil) != tt.ok {
			t.Errorf("%s: validateAppend = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if got := errors.Is(err, eventstore.ErrIdempotencyConflict); got != tt.conflict {
			t.Errorf("%s: errors.Is(ErrIdempotencyConflict) = %v, want %v", tt.name, got, tt.conflict)
		}
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	ctx := context.Background()
	if _, err := New(ctx, "esdb://localhost:2113?tls=false", Config{StreamPrefix: "$all"}); err == nil {
		t.Error("New accepted a '$' stream prefix")
	}
	if _, err := New(ctx, "http://localhost:2113", Config{}); err == nil {
		t.Error("New accepted a connection string that is not esdb://")
	}
}

func TestNewFailsWithoutServer(t *testing.T) {
	// Port 1 on the loopback interface refuses connections: New must report the failure rather than
	// hand out a store whose client is dead.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, "esdb://127.0.0.1:1?tls=false&maxDiscoverAttempts=1", Config{})
	if err == nil {
		s.Close()
		t.Fatal("New succeeded without a server")
	}
}

func TestClosedStore(t *testing.T) {
	// A store closed before use answers ErrClosed without touching the network.
	conf, err := esdb.ParseConnectionString("esdb://127.0.0.1:1?tls=false")
	if err != nil {
		t.Fatal(err)
	}
	conf.Logger = esdb.NoopLogging()
	s := &Store{conf: *conf, batch: defaultReadBatchSize, buffer: defaultSubscriptionBuffer}
	if s.client, err = s.newClient(); err != nil {
		t.Fatal(err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	ctx := context.Background()
	if _, err := s.Append(ctx, "execution-1", eventstore.Any(), eventstore.EventData{ID: uuid.New(), Type: "A"}); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("Append after Close = %v", err)
	}
	if _, err := s.ReadStream(ctx, "execution-1", 0, 10); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("ReadStream after Close = %v", err)
	}
	if _, err := s.ReadAll(ctx, eventstore.Start, 10, eventstore.Filter{}); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("ReadAll after Close = %v", err)
	}
	if _, err := s.Subscribe(ctx, eventstore.Start, eventstore.Filter{}); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("Subscribe after Close = %v", err)
	}
	if _, err := s.HeadPosition(ctx); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("HeadPosition after Close = %v", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("Ping after Close = %v", err)
	}
}

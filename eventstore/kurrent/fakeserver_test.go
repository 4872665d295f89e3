package kurrent

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	api "github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeServer is a small in-memory stand-in for a KurrentDB node, speaking the Streams gRPC service
// the esdb client uses, so the store can be exercised through the real client without a server.
// It models what the store relies on, as read in the KurrentDB sources:
//
//   - every event commits itself: its $all position is (p, p), p increasing;
//   - appends follow IndexWriter.CheckCommit: Any/StreamExists are idempotent by event ID (the
//     server's cache of recent IDs, unbounded here), NoStream/Exact(n) by the events at the
//     revisions the append would use; a partial match is answered as a wrong expected version;
//     an idempotent answer carries the last matched event's revision and position;
//   - a forward read of $all from a position includes it, a backward one excludes it;
//   - a subscription to $all from a position is exclusive, filters on the server and goes live;
//   - system events ($-streams, $-types) are interleaved with the user's.
//
// It is a test double, not a specification: the conformance suite against a real server is what
// settles behaviour.
type fakeServer struct {
	api.UnimplementedStreamsServer

	mu      sync.Mutex
	log     []fakeEvent
	streams map[string][]int         // stream -> indexes into log, by revision
	ids     map[uuid.UUID]fakeRecent // the server's cache of recent event IDs
	next    uint64
	appends int
	changed chan struct{} // closed and replaced on every write
	drop    chan struct{} // closed and replaced to drop every subscription

	// legacyStreamPositions makes stream reads report an unknown commit position (-1), as older
	// servers do.
	legacyStreamPositions bool

	addr string
	srv  *grpc.Server
}

type fakeRecent struct {
	stream   string
	revision uint64
}

type fakeEvent struct {
	id       uuid.UUID
	stream   string
	revision uint64
	typ      string
	data     []byte
	meta     []byte
	pos      uint64
	created  time.Time
}

func startFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{
		streams: map[string][]int{},
		ids:     map[uuid.UUID]fakeRecent{},
		changed: make(chan struct{}),
		drop:    make(chan struct{}),
	}
	// The log starts with a system record at 0/0, as a real one does.
	f.write("$epoch-information", "$epoch-information", []fakeProposed{{id: uuid.New()}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	f.srv = grpc.NewServer()
	api.RegisterStreamsServer(f.srv, f)
	go f.srv.Serve(lis)
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *fakeServer) url() string { return "esdb://" + f.addr + "?tls=false&maxDiscoverAttempts=2" }

type fakeProposed struct {
	id   uuid.UUID
	typ  string
	data []byte
	meta []byte
}

// write appends events to stream; the caller holds no lock.
func (f *fakeServer) write(stream, typ string, evs []fakeProposed) (last fakeEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeLocked(stream, typ, evs)
}

func (f *fakeServer) writeLocked(stream, typ string, evs []fakeProposed) (last fakeEvent) {
	for _, p := range evs {
		if p.typ == "" {
			p.typ = typ
		}
		e := fakeEvent{
			id: p.id, stream: stream, revision: uint64(len(f.streams[stream])), typ: p.typ,
			data: p.data, meta: p.meta, pos: f.next, created: time.Now().UTC(),
		}
		f.next += 100
		f.log = append(f.log, e)
		f.streams[stream] = append(f.streams[stream], len(f.log)-1)
		f.ids[p.id] = fakeRecent{stream: stream, revision: e.revision}
		last = e
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return last
}

// dropSubscriptions ends every open subscription with Unavailable, as a node restart would.
func (f *fakeServer) dropSubscriptions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.drop)
	f.drop = make(chan struct{})
}

func (f *fakeServer) Append(srv api.Streams_AppendServer) error {
	req, err := srv.Recv()
	if err != nil {
		return err
	}
	opts := req.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "options first")
	}
	stream := string(opts.GetStreamIdentifier().GetStreamName())
	var evs []fakeProposed
	for {
		req, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		m := req.GetProposedMessage()
		id, err := esdb.ParseUUIDFromInt64(m.GetId().GetStructured().GetMostSignificantBits(), m.GetId().GetStructured().GetLeastSignificantBits())
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if _, ok := m.GetMetadata()["content-type"]; !ok {
			return status.Error(codes.InvalidArgument, "content-type missing")
		}
		evs = append(evs, fakeProposed{id: id, typ: m.GetMetadata()["type"], data: m.GetData(), meta: m.GetCustomMetadata()})
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	idxs := f.streams[stream]
	cur := int64(len(idxs)) - 1
	const (
		any          = -2
		noStream     = -1
		streamExists = -4
	)
	var expected int64
	switch o := opts.GetExpectedStreamRevision().(type) {
	case *api.AppendReq_Options_Any:
		expected = any
	case *api.AppendReq_Options_NoStream:
		expected = noStream
	case *api.AppendReq_Options_StreamExists:
		expected = streamExists
	case *api.AppendReq_Options_Revision:
		if o.Revision > math.MaxInt64 {
			return status.Error(codes.InvalidArgument, "revision out of range")
		}
		expected = int64(o.Revision)
	}
	wev := func() error {
		w := &api.AppendResp_WrongExpectedVersion{}
		if cur < 0 {
			w.CurrentRevisionOption = &api.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		} else {
			w.CurrentRevisionOption = &api.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(cur)}
		}
		switch expected {
		case any:
			w.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		case noStream:
			w.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
		case streamExists:
			w.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
		default:
			w.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: uint64(expected)}
		}
		return srv.SendAndClose(&api.AppendResp{Result: &api.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: w}})
	}
	success := func(rev uint64, pos uint64) error {
		return srv.SendAndClose(&api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
			CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: rev},
			PositionOption:        &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{CommitPosition: pos, PreparePosition: pos}},
		}}})
	}
	write := func() error {
		if len(evs) == 0 {
			return status.Error(codes.Unimplemented, "the fake does not model empty appends")
		}
		last := f.writeLocked(stream, "", evs)
		if f.appends++; f.appends%3 == 0 {
			f.writeLocked("$stats-fake", "$statsCollected", []fakeProposed{{id: uuid.New()}})
		}
		return success(last.revision, last.pos)
	}
	idempotent := func(end int) error {
		e := f.log[f.streams[stream][end]]
		return success(e.revision, e.pos)
	}

	if expected == streamExists && cur < 0 {
		return wev()
	}
	if expected == any || expected == streamExists {
		end := -1
		for i, p := range evs {
			at, ok := f.ids[p.id]
			if !ok || at.stream != stream {
				if i == 0 {
					return write()
				}
				return wev() // corrupted idempotency
			}
			end = int(at.revision)
		}
		if end < 0 {
			return write()
		}
		return idempotent(end)
	}
	if expected < cur {
		n := expected
		for _, p := range evs {
			n++
			if n <= cur && f.log[idxs[n]].id == p.id {
				continue
			}
			return wev() // first mismatch: wrong version; a later one: corrupted idempotency
		}
		if n == expected {
			return wev()
		}
		return idempotent(int(n))
	}
	if expected > cur {
		return wev()
	}
	return write()
}

func (f *fakeServer) recorded(e fakeEvent, streamRead bool) *api.ReadResp {
	most, least := esdb.UUIDAsInt64(e.id)
	commit := e.pos
	if streamRead && f.legacyStreamPositions {
		commit = math.MaxUint64
	}
	return &api.ReadResp{Content: &api.ReadResp_Event{Event: &api.ReadResp_ReadEvent{
		Event: &api.ReadResp_ReadEvent_RecordedEvent{
			Id:               &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{MostSignificantBits: most, LeastSignificantBits: least}}},
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(e.stream)},
			StreamRevision:   e.revision,
			PreparePosition:  e.pos,
			CommitPosition:   commit,
			Metadata: map[string]string{
				"type":         e.typ,
				"content-type": "application/json",
				"created":      strconv.FormatInt(e.created.UnixNano()/100, 10),
			},
			CustomMetadata: e.meta,
			Data:           e.data,
		},
		Position: &api.ReadResp_ReadEvent_CommitPosition{CommitPosition: commit},
	}}}
}

func (f *fakeServer) Read(req *api.ReadReq, srv api.Streams_ReadServer) error {
	o := req.GetOptions()
	if s := o.GetStream(); s != nil {
		return f.readStream(o, s, srv)
	}
	if o.GetSubscription() != nil {
		return f.subscribeAll(o, srv)
	}
	return f.readAll(o, srv)
}

func (f *fakeServer) readStream(o *api.ReadReq_Options, s *api.ReadReq_Options_StreamOptions, srv api.Streams_ReadServer) error {
	name := string(s.GetStreamIdentifier().GetStreamName())
	f.mu.Lock()
	idxs := f.streams[name]
	var out []fakeEvent
	if len(idxs) > 0 {
		backwards := o.GetReadDirection() == api.ReadReq_Options_Backwards
		var from int64
		switch r := s.GetRevisionOption().(type) {
		case *api.ReadReq_Options_StreamOptions_Start:
			from = 0
		case *api.ReadReq_Options_StreamOptions_End:
			from = int64(len(idxs)) - 1
		case *api.ReadReq_Options_StreamOptions_Revision:
			from = int64(r.Revision)
		}
		for i := from; i >= 0 && i < int64(len(idxs)) && uint64(len(out)) < o.GetCount(); {
			out = append(out, f.log[idxs[i]])
			if backwards {
				i--
			} else {
				i++
			}
		}
	}
	f.mu.Unlock()
	if len(idxs) == 0 {
		return srv.Send(&api.ReadResp{Content: &api.ReadResp_StreamNotFound_{StreamNotFound: &api.ReadResp_StreamNotFound{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(name)},
		}}})
	}
	for _, e := range out {
		if err := srv.Send(f.recorded(e, true)); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeServer) readAll(o *api.ReadReq_Options, srv api.Streams_ReadServer) error {
	backwards := o.GetReadDirection() == api.ReadReq_Options_Backwards
	f.mu.Lock()
	var out []fakeEvent
	if backwards {
		limit := uint64(math.MaxUint64)
		if p := o.GetAll().GetPosition(); p != nil {
			limit = p.GetCommitPosition() // exclusive
		}
		for i := len(f.log) - 1; i >= 0 && uint64(len(out)) < o.GetCount(); i-- {
			if f.log[i].pos < limit {
				out = append(out, f.log[i])
			}
		}
	} else {
		var from uint64
		if p := o.GetAll().GetPosition(); p != nil {
			from = p.GetCommitPosition() // inclusive
		}
		for i := 0; i < len(f.log) && uint64(len(out)) < o.GetCount(); i++ {
			if f.log[i].pos >= from {
				out = append(out, f.log[i])
			}
		}
	}
	f.mu.Unlock()
	for _, e := range out {
		if err := srv.Send(f.recorded(e, false)); err != nil {
			return err
		}
	}
	return nil
}

// matcher is the server-side filter of a subscription.
func matcher(o *api.ReadReq_Options) (func(fakeEvent) bool, error) {
	fo := o.GetFilter()
	if fo == nil {
		return func(fakeEvent) bool { return true }, nil
	}
	expr, onType := fo.GetEventType(), true
	if expr == nil {
		expr, onType = fo.GetStreamIdentifier(), false
	}
	var re *regexp.Regexp
	if expr.GetRegex() != "" {
		var err error
		if re, err = regexp.Compile(expr.GetRegex()); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	prefixes := expr.GetPrefix()
	return func(e fakeEvent) bool {
		s := e.stream
		if onType {
			s = e.typ
		}
		if re != nil {
			return re.MatchString(s)
		}
		for _, p := range prefixes {
			if strings.HasPrefix(s, p) {
				return true
			}
		}
		return false
	}, nil
}

func (f *fakeServer) subscribeAll(o *api.ReadReq_Options, srv api.Streams_ReadServer) error {
	match, err := matcher(o)
	if err != nil {
		return err
	}
	var cursor int64 = -1 // log positions are below 2^63 here: "after cursor"
	if p := o.GetAll().GetPosition(); p != nil {
		cursor = int64(p.GetCommitPosition())
	}
	if err := srv.Send(&api.ReadResp{Content: &api.ReadResp_Confirmation{Confirmation: &api.ReadResp_SubscriptionConfirmation{SubscriptionId: uuid.NewString()}}}); err != nil {
		return err
	}
	caughtUp := false
	for {
		f.mu.Lock()
		var batch []fakeEvent
		for _, e := range f.log {
			if int64(e.pos) > cursor && match(e) {
				batch = append(batch, e)
			}
		}
		changed, drop := f.changed, f.drop
		last := int64(-1)
		if n := len(f.log); n > 0 {
			last = int64(f.log[n-1].pos)
		}
		f.mu.Unlock()
		for _, e := range batch {
			if err := srv.Send(f.recorded(e, false)); err != nil {
				return err
			}
			cursor = int64(e.pos)
		}
		if last > cursor {
			cursor = last // everything up to the end was considered
		}
		if !caughtUp {
			caughtUp = true
			if err := srv.Send(&api.ReadResp{Content: &api.ReadResp_Checkpoint_{Checkpoint: &api.ReadResp_Checkpoint{
				CommitPosition: uint64(max(cursor, 0)), PreparePosition: uint64(max(cursor, 0)),
			}}}); err != nil {
				return err
			}
			if err := srv.Send(&api.ReadResp{Content: &api.ReadResp_CaughtUp_{CaughtUp: &api.ReadResp_CaughtUp{}}}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-drop:
			return status.Error(codes.Unavailable, "node restarting")
		case <-srv.Context().Done():
			return srv.Context().Err()
		}
	}
}

// count returns the number of events in stream.
func (f *fakeServer) count(stream string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.streams[stream])
}

func (f *fakeServer) String() string { return fmt.Sprintf("fake KurrentDB at %s", f.addr) }

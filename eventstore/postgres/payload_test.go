package postgres

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/eventstore"
)

// payloadTexts are payloads as a writer may send them: keys out of order, spaces, a key twice,
// escapes. jsonb would give each back rewritten (sorted keys, its own spacing, the last of two
// keys); json gives back the text as it came.
var payloadTexts = []string{
	`{"b":1,"a":[2,3]}`,
	`{ "z" : "\u00e9\n", "a":{"y":true, "x":null} }`,
	`{"k":1,"k":2}`,
	`[1.50, 2e3, -0]`,
}

// appendEveryWay appends each payload on every append path (one event, several, a group, a
// multi-append's batched creates and updates, a turn's) and returns, per stream, what it wrote.
func appendEveryWay(t *testing.T, st *Store) map[string][]string {
	t.Helper()
	ctx := testCtx(t)
	written := map[string][]string{}
	ev := func(stream, text string) eventstore.EventData {
		written[stream] = append(written[stream], text)
		return eventstore.EventData{ID: uuid.New(), Type: "T", Data: []byte(text), Metadata: []byte(text)}
	}
	for i, text := range payloadTexts {
		one := "one-" + string(rune('a'+i))
		if _, err := st.Append(ctx, one, eventstore.NoStream(), ev(one, text)); err != nil {
			t.Fatalf("append one: %v", err)
		}
		if _, err := st.Append(ctx, one, eventstore.StreamExists(), ev(one, text), ev(one, text)); err != nil {
			t.Fatalf("append several: %v", err)
		}
		a, b := "multi-a"+string(rune('a'+i)), "multi-b"+string(rune('a'+i))
		for _, exp := range []eventstore.ExpectedRevision{eventstore.NoStream(), eventstore.StreamExists()} {
			// Two streams created, then moved on: the batched create, then the batched update.
			if _, err := st.AppendMulti(ctx, eventstore.StreamAppend{Stream: a, Expected: exp, Events: []eventstore.EventData{ev(a, text)}},
				eventstore.StreamAppend{Stream: b, Expected: exp, Events: []eventstore.EventData{ev(b, text), ev(b, text)}}); err != nil {
				t.Fatalf("append multi: %v", err)
			}
		}
		turn, err := st.TakeTurn(ctx, a, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := turn.AppendMulti(ctx, eventstore.StreamAppend{Stream: a, Expected: eventstore.Any(), Events: []eventstore.EventData{ev(a, text)}}); err != nil {
			t.Fatalf("a turn's append: %v", err)
		}
	}
	return written
}

// readPayloads reads back each stream's data and metadata texts.
func readPayloads(t *testing.T, st *Store, streams map[string][]string) (data, meta map[string][]string) {
	t.Helper()
	data, meta = map[string][]string{}, map[string][]string{}
	for stream := range streams {
		got, err := st.ReadStream(testCtx(t), stream, 0, 100)
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		for _, e := range got {
			data[stream], meta[stream] = append(data[stream], string(e.Data)), append(meta[stream], string(e.Metadata))
		}
	}
	return data, meta
}

// payloadStore opens a store on pool, whose log keeps payloads as want: PayloadsAsJSON says so,
// and the store casts its statements' arrays to it.
func payloadStore(t *testing.T, pool *pgxpool.Pool, want payload) *Store {
	t.Helper()
	if asJSON, err := PayloadsAsJSON(testCtx(t), pool); err != nil || asJSON != (want == payloadJSON) {
		t.Fatalf("PayloadsAsJSON: %v, %v; want the log's payloads as %v", asJSON, err, want)
	}
	st := newStore(t, pool, Config{})
	if st.payload != want {
		t.Fatalf("the store casts payloads to %v, want %v", st.payload, want)
	}
	return st
}

// A new log keeps payloads as json, so every append path stores an event's data and metadata
// as the text that came, and every read gives that text back byte for byte.
func TestANewLogKeepsPayloadsAsTheyCame(t *testing.T) {
	pool, _ := newMigratedDB(t, 4)
	st := payloadStore(t, pool, payloadJSON)
	written := appendEveryWay(t, st)
	data, meta := readPayloads(t, st, written)
	if !reflect.DeepEqual(data, written) || !reflect.DeepEqual(meta, written) {
		t.Fatalf("payloads came back rewritten:\nwrote %q\nread  %q\nmeta  %q", written, data, meta)
	}
}

// A log created when payloads were jsonb keeps them so through Migrate (converting rewrites
// the events table, docs/operations.md), and the store appends to it on every path, its array
// parameters cast to jsonb, and reads the same JSON back.
func TestAnOlderLogKeepsJSONBPayloads(t *testing.T) {
	pool := migratedOlderLog(t, strings.NewReplacer("data       json        NOT NULL", "data       jsonb       NOT NULL",
		"metadata   json,", "metadata   jsonb,"))
	st := payloadStore(t, pool, payloadJSONB)
	written := appendEveryWay(t, st)
	data, _ := readPayloads(t, st, written)
	for stream, texts := range written {
		if len(data[stream]) != len(texts) {
			t.Fatalf("%s: read %d events, wrote %d", stream, len(data[stream]), len(texts))
		}
		for i, text := range texts {
			var want, got any
			if json.Unmarshal([]byte(text), &want) != nil || json.Unmarshal([]byte(data[stream][i]), &got) != nil || !reflect.DeepEqual(want, got) {
				t.Fatalf("%s event %d: wrote %s, read %s", stream, i, text, data[stream][i])
			}
		}
	}
}

// Each payload type's statements cast the append's arrays to that type and to no other.
func TestStatementsCastToTheLogsPayloadType(t *testing.T) {
	for p, typ := range map[payload]string{payloadJSON: "json", payloadJSONB: "jsonb"} {
		for _, sql := range []string{fastUpsertManySQL[p], fastUpdateManySQL[p], batchCreateSQL[p], batchUpdateSQL[p]} {
			if strings.Count(sql, "::"+typ+"[]") != 2 || strings.Contains(sql, "{payload}") {
				t.Fatalf("a %s statement casts otherwise:\n%s", typ, sql)
			}
		}
	}
	if _, err := payloadOf("text"); err == nil {
		t.Fatal("payloadOf accepted text")
	}
}

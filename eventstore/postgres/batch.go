package postgres

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/eventstore"
)

// Batched appends: many streams' appends in one statement. A group commit (group.go) or an
// AppendMulti of many parts would otherwise send one statement per stream, and at thousands of
// appends a second the server spends most of its time on per-statement work (parse, plan,
// executor start-up, the CTE machinery), not on the rows. Two statements cover the appends that
// matter for throughput:
//   - batchCreateSQL, for NoStream: creates the streams' rows and inserts their events. A
//     stream that exists already is left alone (ON CONFLICT DO NOTHING) and returns no row:
//     that append declined, exactly as its own fast statement would have.
//   - batchUpdateSQL, for StreamExists and Exact: moves each stream's revision on where its
//     expectation and the revision-order guard hold; the others return no row and declined.
//
// Each append keeps its own expectation and its own result: a declined one wrote nothing and
// does not disturb its neighbours. An event id already stored fails the whole statement (the
// unique index), as it fails a group's own statements; the caller then falls back as before.
// A stream may appear once per statement (an UPDATE touches a row once); appends to a stream
// already in the batch, and Any appends, keep their own statement (batchPlan.rest).
//
// Within each statement parts are sorted by stream name, and the statements' streams are
// disjoint, but a transaction no longer locks all its streams in one sorted order (the update
// statement's streams, then the rest's). Two transactions sharing two streams can therefore
// deadlock; PostgreSQL detects it and rolls one back, whose appends then fall back as for any
// failed group, or, for an AppendMulti, go again on its slow path (correct, only slower).
// Within one process that needs two streams appended to by both a group and an AppendMulti at
// once: rare in the service (a webhook event is appended only after the charge batch that
// recorded its execution's outcome has committed).

// batchEventsSQL is the events' parameter list, one row per event; batchInsertSQL inserts them
// after the streams' rows (s) were created or moved on.
const (
	batchEventsSQL = `unnest(%[1]s::text[], %[2]s::int[], %[3]s::uuid[], %[4]s::text[], %[5]s::{payload}[], %[6]s::{payload}[]) WITH ORDINALITY AS e(stream, off, id, typ, dat, meta, ord)`
	batchInsertSQL = `, ins AS (
    INSERT INTO events (stream, revision, event_id, type, category, data, metadata, tx_id)
    SELECT s.name, s.base + e.off, e.id, e.typ, p.cat, e.dat, e.meta, s.tx
    FROM ` + batchEventsSQL + ` JOIN s ON s.name = e.stream JOIN p ON p.name = e.stream
    ORDER BY e.ord
    RETURNING stream, position
)
SELECT s.name, s.last, s.tx, m.pos
FROM s JOIN (SELECT stream, max(position) AS pos FROM ins GROUP BY stream) m ON m.stream = s.name`
)

var (
	batchCreateSQL = forPayloads(`WITH p AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[]) WITH ORDINALITY AS p(name, n, cat, ord)
), s AS (
    INSERT INTO streams AS st (name, revision, tx_id)
    SELECT p.name, p.n - 1, pg_current_xact_id() FROM p ORDER BY p.ord
    ON CONFLICT (name) DO NOTHING
    RETURNING st.name, -1::bigint AS base, st.revision AS last, st.tx_id AS tx
)` + fmt.Sprintf(batchInsertSQL, "$4", "$5", "$6", "$7", "$8", "$9"))

	batchUpdateSQL = forPayloads(`WITH p AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[]) WITH ORDINALITY AS p(name, n, cat, expect, ord)
), s AS (
    UPDATE streams st SET revision = st.revision + p.n, tx_id = pg_current_xact_id()
    FROM p
    WHERE st.name = p.name AND st.tx_id <= pg_current_xact_id() AND (p.expect < 0 OR st.revision = p.expect)
    RETURNING st.name, st.revision - p.n AS base, st.revision AS last, st.tx_id AS tx
)` + fmt.Sprintf(batchInsertSQL, "$5", "$6", "$7", "$8", "$9", "$10"))
)

// batchMin is the fewest appends worth a batched statement; below it each keeps its own
// statement, whose plan is simpler.
const batchMin = 2

// batchPlan splits appends between the two batched statements and their own statements.
type batchPlan struct {
	create, update []int // indexes of appends in each batched statement, by stream name
	rest           []int // indexes of appends that keep their own statement, in order
	// checks are the parts without events that expect an exact revision of a stream no other
	// part names: multiFast checks them all in one statement (expectAtSQL).
	checks []int
}

// planBatches decides which of parts go into a batched statement. Only appends with events
// whose stream appears once among parts qualify.
func planBatches(parts []encoded) batchPlan {
	seen := make(map[string]int, len(parts))
	for _, e := range parts {
		seen[e.stream]++
	}
	var p batchPlan
	for i, e := range parts {
		rev, exact := e.expected.ExactRevision()
		switch {
		case len(e.ids) == 0 && exact && rev <= math.MaxInt64 && seen[e.stream] == 1:
			p.checks = append(p.checks, i)
		case len(e.ids) == 0 || seen[e.stream] > 1:
			p.rest = append(p.rest, i)
		case e.expected.IsNoStream():
			p.create = append(p.create, i)
		case e.expected.IsStreamExists() || (exact && rev <= math.MaxInt64):
			p.update = append(p.update, i)
		default:
			p.rest = append(p.rest, i)
		}
	}
	byName := func(a, b int) int { return strings.Compare(parts[a].stream, parts[b].stream) }
	if len(p.create) < batchMin {
		p.rest, p.create = append(p.rest, p.create...), nil
	}
	if len(p.update) < batchMin {
		p.rest, p.update = append(p.rest, p.update...), nil
	}
	slices.SortFunc(p.create, byName)
	slices.SortFunc(p.update, byName)
	slices.SortStableFunc(p.rest, byName)
	return p
}

// batchArgs is one batched statement's parameters.
func batchArgs(parts []encoded, idx []int, update bool) []any {
	n := 0
	for _, i := range idx {
		n += len(parts[i].ids)
	}
	var (
		names  = make([]string, len(idx))
		counts = make([]int32, len(idx))
		cats   = make([]string, len(idx))
		expect = make([]int64, len(idx))
		evStr  = make([]string, 0, n)
		evOff  = make([]int32, 0, n)
		ids    = make([][16]byte, 0, n)
		types  = make([]string, 0, n)
		data   = make([][]byte, 0, n)
		meta   = make([][]byte, 0, n)
	)
	for k, i := range idx {
		e := parts[i]
		names[k], counts[k], cats[k] = e.stream, int32(len(e.ids)), eventstore.Category(e.stream)
		expect[k] = -1
		if rev, ok := e.expected.ExactRevision(); ok {
			expect[k] = int64(rev)
		}
		for j := range e.ids {
			evStr = append(evStr, e.stream)
			evOff = append(evOff, int32(j+1))
		}
		ids = append(ids, e.ids...)
		types = append(types, e.types...)
		data = append(data, e.data...)
		meta = append(meta, e.meta...)
	}
	if update {
		return []any{names, counts, cats, expect, evStr, evOff, ids, types, data, meta}
	}
	return []any{names, counts, cats, evStr, evOff, ids, types, data, meta}
}

// queueBatches queues plan's batched statements on b; readBatches reads their rows.
func queueBatches(b *pgx.Batch, parts []encoded, plan batchPlan, p payload) {
	if len(plan.create) > 0 {
		b.Queue(batchCreateSQL[p], batchArgs(parts, plan.create, false)...)
	}
	if len(plan.update) > 0 {
		b.Queue(batchUpdateSQL[p], batchArgs(parts, plan.update, true)...)
	}
}

// readBatches reads the rows of the statements queueBatches queued and records each written
// append's result in res and ok (an append with no row declined).
func readBatches(br pgx.BatchResults, parts []encoded, plan batchPlan, res []eventstore.AppendResult, ok []bool) error {
	for _, idx := range [][]int{plan.create, plan.update} {
		if len(idx) == 0 {
			continue
		}
		byName := make(map[string]int, len(idx))
		for _, i := range idx {
			byName[parts[i].stream] = i
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var (
			name     string
			last     int64
			commit   uint64
			position int64
		)
		_, err = pgx.ForEachRow(rows, []any{&name, &last, &commit, &position}, func() error {
			i, found := byName[name]
			if !found {
				return fmt.Errorf("eventstore/postgres: batched append returned stream %s it was not given", name)
			}
			res[i] = eventstore.AppendResult{NextRevision: uint64(last), Position: eventstore.Position{Commit: commit, Prepare: uint64(position)}}
			ok[i] = true
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

package postgres

import (
	"fmt"
	"strings"
)

// payload is the SQL type of the events' data and metadata columns. A log created since 11-28
// keeps them as json: text validated and stored as it came, which an append does not parse
// into a binary form and a read does not print back (statement time −6 to −16 %, log reads −41 %,
// docs/performance.md, "Payloads kept as text"). An older log keeps jsonb (CREATE TABLE IF NOT
// EXISTS leaves a table as it was) until converted (docs/operations.md, "Payloads as json"); the
// store's fast paths cast their array parameters to whichever the log has, so neither pays a
// conversion. The slow path (eventstore_append, whose parameters stay jsonb[]: a conflict, a
// revision beyond int64) converts, and an event it writes to a json log is kept as jsonb prints
// it: the same JSON, its keys sorted.
// Nothing looks inside an event's payload in SQL but tests and people, and json answers their
// -> and ->> as jsonb does.
type payload int

const (
	payloadJSON payload = iota
	payloadJSONB
)

// payloadTypeSQL is the type of events.data, NULL when there is no events table.
const payloadTypeSQL = `SELECT format_type(atttypid, NULL) FROM pg_attribute
WHERE attrelid = to_regclass('events') AND attname = 'data' AND NOT attisdropped`

// payloadOf reads the payload type a column's format_type names.
func payloadOf(typ string) (payload, error) {
	switch typ {
	case "json":
		return payloadJSON, nil
	case "jsonb":
		return payloadJSONB, nil
	}
	return 0, fmt.Errorf("events.data is %q, want json or jsonb", typ)
}

// forPayloads is sql for each payload type, its {payload} placeholders the type's name.
func forPayloads(sql string) [2]string {
	return [2]string{
		payloadJSON:  strings.ReplaceAll(sql, "{payload}", "json"),
		payloadJSONB: strings.ReplaceAll(sql, "{payload}", "jsonb"),
	}
}

# scripts/pgbench-ceiling.sh: sourced by the benchmark scripts. Creates a scratch database with
# a table shaped like the event store's rows (minus revision, category, tx_id and the stream
# lock row) and a pgbench script inserting one such row per transaction: PostgreSQL's own
# single-row insert ceiling, to compare Switchyard's figures with in the same run.
#
# Needs PGHOST/PGPORT/PGUSER, SCRATCH_DB and work (a temporary directory) set; defines
# pgbench_tps CLIENTS DURATION and drops the scratch database and work on exit.

PGBENCH="${PGBENCH:-$(command -v pgbench || echo /usr/bin/pgbench)}"

cleanup() {
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS ${SCRATCH_DB} WITH (FORCE)" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

psql -X -q -d postgres -c "CREATE DATABASE ${SCRATCH_DB}"
psql -X -q -d "$SCRATCH_DB" -c "
CREATE TABLE bench_events (
    position   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream     text        NOT NULL,
    event_id   uuid        NOT NULL UNIQUE,
    type       text        NOT NULL,
    data       json        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)"
cat >"$work/insert.sql" <<'SQL'
\set s random(0, 9999)
INSERT INTO bench_events (stream, event_id, type, data) VALUES ('bench-' || :s, gen_random_uuid(), 'Benchmarked', '{"n": 1, "s": "data"}');
SQL

# pgbench_tps CLIENTS DURATION: transactions per second of the insert script.
pgbench_tps() {
	"$PGBENCH" -n -M prepared -c "$1" -j 2 -T "$2" -f "$work/insert.sql" "$SCRATCH_DB" 2>/dev/null |
		awk '/^tps = / { print $3; exit }'
}

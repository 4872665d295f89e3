#!/usr/bin/env bash
# bench-append.sh: how close does the event store's append come to what the server can do?
#
# Runs pgbench with a custom script that inserts one comparable row per transaction (stream
# name, uuid event id with a unique index, type, json data, created_at) into a scratch table of
# a scratch database, at 16 and 64 clients, then the Go benchmark BenchmarkAppend at the same
# concurrency (one event per append, its own fresh database), and prints appends/s, pgbench's
# tps and their ratio. Target: ratio >= 0.60.
#
# Usage: scripts/bench-append.sh            (DURATION=10 CLIENTS="16 64" by default)
# Server: PGHOST/PGPORT/PGUSER (default 127.0.0.1:5432, postgres); the Go benchmark gets the
# same server through DATABASE_URL. Needs pgbench, psql and go on PATH.
set -euo pipefail

export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
export DATABASE_URL="${DATABASE_URL:-postgres://${PGUSER}@${PGHOST}:${PGPORT}/postgres?sslmode=disable}"
DURATION="${DURATION:-10}"
CLIENTS="${CLIENTS:-16 64}"
SCRATCH_DB="sw_bench_append_$$"

cd "$(dirname "$0")/.."

work="$(mktemp -d)"
# shellcheck source=scripts/pgbench-ceiling.sh
source scripts/pgbench-ceiling.sh

printf '\n%-8s %14s %14s %8s\n' clients pgbench_tps appends_per_s ratio
results=()
for c in $CLIENTS; do
	tps="$(pgbench_tps "$c" "$DURATION")"
	go test ./eventstore/postgres -run '^$' -bench "^BenchmarkAppend\$/^c${c}\$" -benchtime "${DURATION}s" -count 1 >"$work/go-$c.txt" 2>&1 || {
		cat "$work/go-$c.txt" >&2
		exit 1
	}
	aps="$(awk '{ for (i = 2; i <= NF; i++) if ($i == "appends/s") print $(i-1) }' "$work/go-$c.txt" | tail -1)"
	ratio="$(awk -v a="$aps" -v t="$tps" 'BEGIN { printf "%.2f", a / t }')"
	results+=("$(printf '%-8s %14.0f %14.0f %8s' "$c" "$tps" "$aps" "$ratio")")
	printf '%s\n' "${results[-1]}"
done

#!/usr/bin/env bash
# bench-wal.sh: what an execution writes to PostgreSQL's WAL as the database grows.
#
# Runs ROUNDS rounds of `switchyard bench e2e --cache-window CACHE_WINDOW --total TOTAL` (distinct
# calls at the service's defaults: each runs, bills and opens a window) on one scratch database
# that keeps every round's events, each round after a CHECKPOINT, and prints per round the events
# in the database, executions/s, and per execution the full-page images and bytes the WAL took
# (pg_stat_wal). A full-page image is a page's first change after a checkpoint, written whole:
# an index whose inserts land on random pages pays one for nearly every insert once it is larger
# than what a checkpoint interval touches, so the bytes per execution grow with the database;
# one that inserts at its right edge pays a few per checkpoint (docs/performance.md, "Time-ordered
# IDs"). To compare two builds, run the script in a worktree of each.
#
# pg_stat_wal counts the whole server: run it on a server nothing else writes to. CHECKPOINT
# needs a superuser or the pg_checkpoint role.
#
# Usage: scripts/bench-wal.sh   (ROUNDS=10 TOTAL=10000 CLIENTS=32 CACHE_WINDOW=10m by default)
# Server: PGHOST/PGPORT/PGUSER (default 127.0.0.1:5432, postgres). Needs PostgreSQL 14 or later,
# psql and go.
set -euo pipefail

export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
ROUNDS="${ROUNDS:-10}"
TOTAL="${TOTAL:-10000}"
CLIENTS="${CLIENTS:-32}"
CACHE_WINDOW="${CACHE_WINDOW:-10m}"
SCRATCH_DB="sw_bench_wal_$$"

cd "$(dirname "$0")/.."

work="$(mktemp -d)"
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS ${SCRATCH_DB} WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
psql -X -q -d postgres -c "CREATE DATABASE ${SCRATCH_DB}"
go build -o "$work/switchyard" ./cmd/switchyard
# One data directory for every round: its secret key seals what the first round wrote.
export DATABASE_URL="postgres://${PGUSER}@${PGHOST}:${PGPORT}/${SCRATCH_DB}?sslmode=disable" SWITCHYARD_DATA_DIR="$work/data"

wal() { psql -X -qtA -F' ' -d postgres -c "SELECT wal_fpi, wal_bytes FROM pg_stat_wal"; }

printf '%-6s %10s %14s %14s %14s\n' round events executions/s fpi/execution wal_KiB/execution
for round in $(seq "$ROUNDS"); do
	psql -X -q -d postgres -c CHECKPOINT
	read -r fpi0 bytes0 < <(wal)
	rate="$("$work/switchyard" bench e2e --clients "$CLIENTS" --total "$TOTAL" --cache-window "$CACHE_WINDOW" 2>"$work/bench.log" |
		awk '/^e2e:/ { for (i = 1; i <= NF; i++) if ($i == "executions/s") print $(i-1) }')" || {
		cat "$work/bench.log" >&2
		exit 1
	}
	read -r fpi1 bytes1 < <(wal)
	events="$(psql -X -qtA -d "$SCRATCH_DB" -c "SELECT count(*) FROM events")"
	awk -v r="$round" -v ev="$events" -v rate="$rate" -v n="$TOTAL" -v f="$((fpi1 - fpi0))" -v b="$((bytes1 - bytes0))" \
		'BEGIN { printf "%-6s %10s %14s %14.3f %14.2f\n", r, ev, rate, f / n, b / n / 1024 }'
done

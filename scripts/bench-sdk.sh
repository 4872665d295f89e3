#!/usr/bin/env bash
# bench-sdk.sh: the SDK API against what this PostgreSQL server can do, in one run.
#
# Runs pgbench with a custom script inserting one comparable row per transaction (as
# scripts/bench-append.sh does) at CLIENTS clients, then `switchyard bench` on a scratch
# database: submits without waiting from CLIENTS signed clients, waitForMs latency at RATE
# requests/s, and end-to-end executions/s for TOTAL executions. Prints the submit/pgbench
# ratio (target >= 0.40).
#
# Usage: scripts/bench-sdk.sh     (DURATION=10 CLIENTS=32 RATE=200 TOTAL=10000 by default)
# Server: PGHOST/PGPORT/PGUSER (default 127.0.0.1:5432, postgres). Needs pgbench, psql, go.
set -euo pipefail

export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
DURATION="${DURATION:-10}"
CLIENTS="${CLIENTS:-32}"
RATE="${RATE:-200}"
TOTAL="${TOTAL:-10000}"
SCRATCH_DB="sw_bench_sdk_$$"

cd "$(dirname "$0")/.."

work="$(mktemp -d)"
# shellcheck source=scripts/pgbench-ceiling.sh
source scripts/pgbench-ceiling.sh

tps="$(pgbench_tps "$CLIENTS" "$DURATION")"
psql -X -q -d "$SCRATCH_DB" -c "DROP TABLE bench_events"

go build -o "$work/switchyard" ./cmd/switchyard
export DATABASE_URL="postgres://${PGUSER}@${PGHOST}:${PGPORT}/${SCRATCH_DB}?sslmode=disable" SWITCHYARD_DATA_DIR="$work/data" \
	SWITCHYARD_LOG_LEVEL=warn
"$work/switchyard" bench --clients "$CLIENTS" --duration "${DURATION}s" --rate "$RATE" --total "$TOTAL" | tee "$work/bench.txt"
# Last, as its executions are left unexecuted: the submit path alone, with no executor competing.
"$work/switchyard" bench submit --submit-only --clients "$CLIENTS" --duration "${DURATION}s" | sed 's/^submit:/submit-only:/' | tee -a "$work/bench.txt"
sps="$(awk '/^submit:/ { for (i = 1; i <= NF; i++) if ($i == "submits/s") print $(i-1) }' "$work/bench.txt")"
sos="$(awk '/^submit-only:/ { for (i = 1; i <= NF; i++) if ($i == "submits/s") print $(i-1) }' "$work/bench.txt")"
printf '\npgbench single-row inserts at %s clients: %.0f tps\n' "$CLIENTS" "$tps"
printf 'submits, executions running alongside:  %s/s (ratio %s)\n' "$sps" "$(awk -v a="$sps" -v t="$tps" 'BEGIN { printf "%.2f", a / t }')"
printf 'submits alone (--submit-only):          %s/s (ratio %s; target 0.40)\n' "$sos" "$(awk -v a="$sos" -v t="$tps" 'BEGIN { printf "%.2f", a / t }')"

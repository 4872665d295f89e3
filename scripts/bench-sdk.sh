#!/usr/bin/env bash
# bench-sdk.sh: the SDK API against what this PostgreSQL server can do, in one run.
#
# 1. pgbench with a custom script inserting one comparable row per transaction (as
#    scripts/bench-append.sh does) at CLIENTS clients: the single-row insert ceiling.
# 2. River's own benchmark (riverqueue/river cmd/river, pinned at RIVER_VERSION, built from
#    the Go module proxy into a temporary directory): `river bench --duration` on a scratch
#    database of the same server, for jobs inserted and worked per second.
# 3. `switchyard bench floor`: the same signed clients against the service's SDK authentication
#    alone, answered without a database (the least a submit can cost here).
# 4. `switchyard bench` on a scratch database: submits without waiting from CLIENTS signed
#    clients (executor running), waitForMs latency at RATE requests/s, waitForMs one caller at a
#    time on an idle server, end-to-end executions/s for TOTAL executions; then one instance
#    against two sharing the database, alternating for PAIRS rounds, each a warm second e2e
#    phase (INSTANCES2=0 skips the two), at CLIENTS and at LOAD_CLIENTS clients; e2e with the
#    service's default cache window
#    (CACHE_WINDOW, distinct calls, each opening a window), workflow runs of three core.echo
#    stages beside an e2e of the same process (IDLE runs one at a time, RUNS by CLIENTS
#    callers; RUNS=0 skips it), and the submit path alone (--submit-only).
# 5. The headline: end to end with the service's defaults (CACHE_WINDOW windows, distinct calls)
#    driven from this process against a separately started `serve` (`bench --target`), and
#    against two serves sharing the database (the clients spread over both), beside the same
#    e2e in-process with windows and without, alternating for PAIRS rounds (2); the in-process
#    one with windows then repeats its calls, each a free repeat of its window, and so do two
#    instances (INSTANCES2=0 skips the two-instance phases).
# 6. Many tenants: the same one-against-two instance rounds with the calls spread over
#    WORKSPACES workspaces (8; 0 skips), each with its own account and key and each called on
#    every instance, as a platform's tenants are behind a load balancer.
# Then it prints the ratios the targets of docs/performance.md are stated in.
#
# Usage: scripts/bench-sdk.sh   (DURATION=10 CLIENTS=32 RATE=200 TOTAL=10000 IDLE=200
#        LOAD_CLIENTS=128 CACHE_WINDOW=10m RUNS=1000 WORKSPACES=8 by default; RIVER=0 skips River, CACHE_WINDOW=0 the
#        cache-window phase)
# Server: PGHOST/PGPORT/PGUSER (default 127.0.0.1:5432, postgres). Needs pgbench, psql, go.
set -euo pipefail

export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
DURATION="${DURATION:-10}"
CLIENTS="${CLIENTS:-32}"
RATE="${RATE:-200}"
TOTAL="${TOTAL:-10000}"
IDLE="${IDLE:-200}"
RIVER="${RIVER:-1}"
INSTANCES2="${INSTANCES2:-1}"
LOAD_CLIENTS="${LOAD_CLIENTS:-128}"
CACHE_WINDOW="${CACHE_WINDOW:-10m}"
RUNS="${RUNS:-1000}"
PAIRS="${PAIRS:-2}"
WORKSPACES="${WORKSPACES:-8}"
RIVER_VERSION="${RIVER_VERSION:-v0.29.0}"
SCRATCH_DB="sw_bench_sdk_$$"
RIVER_DB="sw_bench_river_$$"

cd "$(dirname "$0")/.."

work="$(mktemp -d)"
# shellcheck source=scripts/pgbench-ceiling.sh
source scripts/pgbench-ceiling.sh
serve_pids=""
trap '[ -z "$serve_pids" ] || kill $serve_pids 2>/dev/null || true; cleanup; psql -X -q -d postgres -c "DROP DATABASE IF EXISTS ${RIVER_DB} WITH (FORCE)" >/dev/null 2>&1 || true' EXIT

# quiesce: each benchmark starts with no dirty buffers of the one before left to write back,
# so no figure pays for another benchmark's writes. Needs the pg_checkpoint role; without it
# the run goes on unquiesced.
quiesce() { psql -X -q -d postgres -c CHECKPOINT >/dev/null 2>&1 || echo "bench-sdk: CHECKPOINT refused; figures may carry the previous benchmark's writes" >&2; }

quiesce
tps="$(pgbench_tps "$CLIENTS" "$DURATION")"
psql -X -q -d "$SCRATCH_DB" -c "DROP TABLE bench_events"

jobs=""
if [ "$RIVER" = 1 ]; then
	# cmd/river is its own module; `go install module@version` would ask the proxy for the
	# module's deprecation (its latest version), so it is built from a throw-away module.
	mkdir -p "$work/river"
	(
		cd "$work/river"
		go mod init riverbench >/dev/null 2>&1
		GOFLAGS=-mod=mod go get "github.com/riverqueue/river/cmd/river@${RIVER_VERSION}" >/dev/null 2>&1
		go build -o "$work/river-bin" github.com/riverqueue/river/cmd/river
	)
	psql -X -q -d postgres -c "CREATE DATABASE ${RIVER_DB}"
	river_url="postgres://${PGUSER}@${PGHOST}:${PGPORT}/${RIVER_DB}?sslmode=disable"
	"$work/river-bin" migrate-up --database-url "$river_url" >/dev/null
	quiesce
	"$work/river-bin" bench --database-url "$river_url" --duration "${DURATION}s" >"$work/river.txt" 2>&1
	tail -1 "$work/river.txt"
	# The summary line: "bench: total jobs worked [ N ], ..., overall job/sec [ R ], running ...".
	jobs="$(sed -n 's/.*overall job\/sec \[ *\([0-9.]*\) *\].*/\1/p' "$work/river.txt" | tail -1)"
	# River's database is done with: its autovacuum must not run under Switchyard's figures.
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS ${RIVER_DB} WITH (FORCE)"
fi

go build -o "$work/switchyard" ./cmd/switchyard
export DATABASE_URL="postgres://${PGUSER}@${PGHOST}:${PGPORT}/${SCRATCH_DB}?sslmode=disable" SWITCHYARD_DATA_DIR="$work/data" \
	SWITCHYARD_LOG_LEVEL=warn
# The signed-request floor: the same signed clients against the service's SDK authentication
# alone, answered without a database. No submit costs less; with pgbench's insert it bounds
# what the submit ratio can reach on this machine (printed at the end).
"$work/switchyard" bench floor --clients "$CLIENTS" --duration "${DURATION}s" | tee "$work/bench.txt"
quiesce
"$work/switchyard" bench --clients "$CLIENTS" --duration "${DURATION}s" --rate "$RATE" --total "$TOTAL" --idle "$IDLE" | tee -a "$work/bench.txt"
# One instance against two sharing the database, at CLIENTS and then at LOAD_CLIENTS (0 skips
# it) clients, alternating for PAIRS rounds: each figure is the second e2e phase of a fresh
# process (a workspace of its own), after a warm-up e2e (a cold first phase runs 8 to 15 % slower),
# so the two sides differ in the instances alone, and a ratio is the mean of PAIRS rounds, not
# one noisy pair. INSTANCES2=0 runs only the one-instance side (for the load figure).
# scaling CLIENTS PREFIX [ARGS...]: PAIRS rounds of one instance (PREFIX-one) then two
# (PREFIX-two), each with bench's further ARGS.
scaling() {
	local clients="$1" prefix="$2" n
	shift 2
	for _ in $(seq "$PAIRS"); do
		for n in 1 2; do
			[ "$n" = 2 ] && [ "$INSTANCES2" != 1 ] && continue
			local label="$prefix-one"
			[ "$n" = 2 ] && label="$prefix-two"
			quiesce
			"$work/switchyard" bench e2e e2e --instances "$n" --clients "$clients" --total "$TOTAL" "$@" |
				awk -v l="$label" -v c="$prefix" '/^e2e:/ { sub(/^e2e:/, n++ ? l ":" : l "-warmup:") } /^claims:/ { sub(/^claims:/, c "-claims:") } { print }' |
				tee -a "$work/bench.txt"
		done
	done
}
scaling "$CLIENTS" e2e-scale
[ "$LOAD_CLIENTS" != 0 ] && scaling "$LOAD_CLIENTS" e2e-load
# The same calls spread over many workspaces: each workspace's account takes its charges a batch
# at a time, and with two instances every account is charged from both.
[ "$WORKSPACES" != 0 ] && scaling "$CLIENTS" e2e-tenants --workspaces "$WORKSPACES"
# End to end as a user runs the service: its defaults, cache windows included (distinct calls,
# each of which runs, bills and opens a window), driven from outside against a separately
# started serve, and against two of them side by side (INSTANCES2=0 skips them); beside it the
# same e2e in-process, with windows and without (the phases above turn windows off, so every
# call runs). They alternate for PAIRS rounds, so that a ratio is not one noisy pair. The serves
# run only during their phase: their projectors and log tails would otherwise compete with the
# in-process service's.
if [ "$CACHE_WINDOW" != 0 ]; then
	# Below the kernel's ephemeral range (ip_local_port_range, 32768 up by default): a port in
	# it may be the local end of one of the many connections the phases above opened, and the
	# serve could not bind it.
	port=$((20000 + $$ % 12000))
	# external N LABEL: N serves started side by side on the scratch database (a load balancer's
	# instances), driven from this process (`bench --target`, the clients spread over them),
	# then stopped: their projectors and log tails would otherwise compete with what follows.
	external() {
		local n="$1" label="$2" targets="" pid
		for _ in $(seq "$n"); do
			while (: >"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; do port=$((port + 1)); done
			SWITCHYARD_LISTEN="127.0.0.1:${port}" SWITCHYARD_CACHE_WINDOW="$CACHE_WINDOW" \
				SWITCHYARD_RATE_LIMIT=1000000000 SWITCHYARD_RATE_BURST=1000000000 \
				"$work/switchyard" serve >>"$work/serve.log" 2>&1 &
			pid=$!
			serve_pids="$serve_pids $pid"
			until curl -sf "http://127.0.0.1:${port}/healthz" >/dev/null; do
				kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
				sleep 0.2
			done
			targets="${targets:+$targets,}http://127.0.0.1:${port}"
			port=$((port + 1))
		done
		# The bench process only mints a key and reads the read model: a small pool.
		DATABASE_URL="${DATABASE_URL}&pool_max_conns=4" "$work/switchyard" bench e2e --target "$targets" --clients "$CLIENTS" --total "$TOTAL" --cache-window "$CACHE_WINDOW" |
			sed "s/^e2e:/${label}:/; s/^claims:/${label}-claims:/" | tee -a "$work/bench.txt"
		# shellcheck disable=SC2086 # the pids are words
		kill $serve_pids
		# shellcheck disable=SC2086
		for pid in $serve_pids; do wait "$pid" || true; done
		serve_pids=""
	}
	for _ in $(seq "$PAIRS"); do
		quiesce
		external 1 e2e-external
		if [ "$INSTANCES2" = 1 ]; then
			quiesce
			external 2 e2e-external-two
		fi
		quiesce
		# Its second phase repeats the first's calls: each is free, its window's leader's repeat.
		"$work/switchyard" bench e2e e2e --clients "$CLIENTS" --total "$TOTAL" --cache-window "$CACHE_WINDOW" |
			awk '/^e2e:/ { sub(/^e2e:/, n++ ? "e2e-repeat:" : "e2e-cache:") } { print }' | tee -a "$work/bench.txt"
		# The same on two instances: half the repeats reach the instance that did not open
		# their window (reactors/windows tells it).
		if [ "$INSTANCES2" = 1 ]; then
			quiesce
			"$work/switchyard" bench e2e e2e --instances 2 --clients "$CLIENTS" --total "$TOTAL" --cache-window "$CACHE_WINDOW" |
				awk '/^e2e:/ { sub(/^e2e:/, n++ ? "e2e-repeat-two:" : "e2e-cache-two:") } /^claims:/ { sub(/^claims:/, "e2e-cache-claims:") } { print }' |
				tee -a "$work/bench.txt"
		fi
		quiesce
		"$work/switchyard" bench e2e --clients "$CLIENTS" --total "$TOTAL" | sed 's/^e2e:/e2e-off:/' | tee -a "$work/bench.txt"
	done
fi
# Workflow runs (ON_API_CALLED -> three core.echo stages) trigger to COMPLETED, their stages/s
# set beside the executions/s of an e2e in the same process (issue 29's targets).
if [ "$RUNS" != 0 ]; then
	quiesce
	"$work/switchyard" bench e2e runs --clients "$CLIENTS" --total "$TOTAL" --idle "$IDLE" --runs "$RUNS" |
		sed 's/^e2e:/e2e-runs:/' | tee -a "$work/bench.txt"
fi
# Last, as its executions are left unexecuted: the submit path alone, with no executor competing.
quiesce
"$work/switchyard" bench submit --submit-only --clients "$CLIENTS" --duration "${DURATION}s" | sed 's/^submit:/submit-only:/' | tee -a "$work/bench.txt"

# field PREFIX UNIT: the number before UNIT on the line starting with PREFIX.
field() { awk -v p="$1" -v u="$2" 'index($0, p) == 1 { for (i = 2; i <= NF; i++) if ($i == u) print $(i-1) }' "$work/bench.txt"; }
# mean PREFIX UNIT: the mean of field's numbers (the rounds of one phase).
mean() { field "$1" "$2" | awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
floor="$(field floor: submits/s)"
sps="$(field submit: submits/s)"
sos="$(field submit-only: submits/s)"
e2e="$(field e2e: executions/s)"
e2e1="$(mean e2e-scale-one: executions/s)"
e2e2="$(mean e2e-scale-two: executions/s)"
e2el="$(mean e2e-load-one: executions/s)"
e2el2="$(mean e2e-load-two: executions/s)"
e2et="$(mean e2e-tenants-one: executions/s)"
e2et2="$(mean e2e-tenants-two: executions/s)"
e2ec="$(mean e2e-cache: executions/s)"
e2eo="$(mean e2e-off: executions/s)"
e2er="$(mean e2e-repeat: executions/s)"
e2ec2="$(mean e2e-cache-two: executions/s)"
e2er2="$(mean e2e-repeat-two: executions/s)"
e2ex="$(mean e2e-external: executions/s)"
e2ex2="$(mean e2e-external-two: executions/s)"
idle_p50="$(awk '/^idle:/ { for (i = 1; i <= NF; i++) if ($i == "p50") print $(i+1) }' "$work/bench.txt" | tr -d ,)"
wait_line="$(grep '^wait:' "$work/bench.txt" || true)"

printf '\npgbench single-row inserts at %s clients: %.0f tps\n' "$CLIENTS" "$tps"
[ -n "$jobs" ] && printf 'River %s bench: %s jobs/s\n' "$RIVER_VERSION" "$jobs"
# ceiling: a submit that cost the floor plus one pgbench insert, both sharing the cores.
ceiling="$(awk -v f="$floor" -v t="$tps" 'BEGIN { if (f == "" || t == "" || f == 0 || t == 0) print ""; else printf "%.0f", 1 / (1 / f + 1 / t) }')"
printf 'signed-request floor (no database):     %s/s (ratio %s to pgbench)\n' "$floor" "$(ratio "$floor" "$tps")"
[ -n "$ceiling" ] && printf 'floor plus one pgbench insert a submit:  %s/s (ratio %s to pgbench): the most a submit can reach here\n' "$ceiling" "$(ratio "$ceiling" "$tps")"
printf 'submits, executions running alongside:  %s/s (ratio %s to pgbench; target 0.40)\n' "$sps" "$(ratio "$sps" "$tps")"
printf 'submits alone (--submit-only):          %s/s (ratio %s to pgbench)\n' "$sos" "$(ratio "$sos" "$tps")"
if [ -n "$e2ex" ]; then
	printf 'END TO END, defaults (%s cache windows), separate serve: %s/s (ratio %s to River; target 0.25)\n' "$CACHE_WINDOW" "$e2ex" "$(ratio "$e2ex" "$jobs")"
	if [ -n "$e2ex2" ]; then
		printf '  two separate serves, defaults:        %s/s (%s of one separate serve; target 0.9)\n' "$e2ex2" "$(ratio "$e2ex2" "$e2ex")"
		grep '^e2e-external-two-claims:' "$work/bench.txt" | sed 's/^e2e-external-two-claims:/  two separate serves: claims:/' || true
	fi
	printf '  in-process, defaults:                 %s/s (separate serve at %s of it; target 0.9)\n' "$e2ec" "$(ratio "$e2ex" "$e2ec")"
	printf '  in-process, windows off:              %s/s (defaults at %s of it; target 0.9)\n' "$e2eo" "$(ratio "$e2ec" "$e2eo")"
	printf '  in-process, the same calls repeated:  %s/s (free; %s of the first calls)\n' "$e2er" "$(ratio "$e2er" "$e2ec")"
	if [ -n "$e2ec2" ]; then
		printf '  two instances, defaults:              %s/s (%s of one instance; target 0.9)\n' "$e2ec2" "$(ratio "$e2ec2" "$e2ec")"
		printf '  two instances, the same calls repeated: %s/s (%s of one instance)\n' "$e2er2" "$(ratio "$e2er2" "$e2er")"
	fi
	printf '  (means of %s alternating rounds; each round: %s)\n' "$PAIRS" "$(grep -E '^e2e-(external|external-two|cache|repeat|off|cache-two|repeat-two):' "$work/bench.txt" | awk '{ print $1, $(NF-1) }' | paste -sd' ')"
fi
printf 'end-to-end executions:                  %s/s (ratio %s to River; target 0.15)\n' "$e2e" "$(ratio "$e2e" "$jobs")"
[ -n "$e2e2" ] && printf 'end-to-end, two instances:              %s/s (%s of one instance at %s/s; target 0.9)\n' "$e2e2" "$(ratio "$e2e2" "$e2e1")" "$e2e1"
grep '^e2e-scale-claims:' "$work/bench.txt" | sed 's/^e2e-scale-claims:/two instances: claims:/' || true
[ -n "$e2el" ] && printf 'end-to-end at %s clients:               %s/s (%s of %s clients, target 0.9; ratio %s to River)\n' "$LOAD_CLIENTS" "$e2el" "$(ratio "$e2el" "$e2e1")" "$CLIENTS" "$(ratio "$e2el" "$jobs")"
[ -n "$e2el2" ] && printf 'end-to-end at %s clients, two instances: %s/s (%s of one instance; target 0.9)\n' "$LOAD_CLIENTS" "$e2el2" "$(ratio "$e2el2" "$e2el")"
grep '^e2e-load-claims:' "$work/bench.txt" | sed 's/^e2e-load-claims:/two instances under load: claims:/' || true
[ -n "$e2et" ] && printf 'end-to-end over %s workspaces:           %s/s (%s of one workspace)\n' "$WORKSPACES" "$e2et" "$(ratio "$e2et" "$e2e1")"
[ -n "$e2et2" ] && printf 'end-to-end over %s workspaces, two instances: %s/s (%s of one instance)\n' "$WORKSPACES" "$e2et2" "$(ratio "$e2et2" "$e2et")"
grep '^e2e-tenants-claims:' "$work/bench.txt" | sed 's/^e2e-tenants-claims:/two instances over many workspaces: claims:/' || true
printf '  (scaling rounds: %s)\n' "$(grep -E '^e2e-(scale|load|tenants)-(one|two):' "$work/bench.txt" | awk '{ print $1, $(NF-1) }' | paste -sd' ')"
printf 'waitForMs, one caller, idle:            p50 %s (target 5ms)\n' "$idle_p50"
printf 'waitForMs at %s/s:                      %s (targets p50 10ms, p99 50ms)\n' "$RATE" "${wait_line#wait: }"
grep '^runs idle:' "$work/bench.txt" | sed 's/$/ (target p50 15ms)/' || true
grep '^runs:' "$work/bench.txt" | sed 's/$/ (target 0.90 of e2e)/' || true

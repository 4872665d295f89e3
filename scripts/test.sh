#!/usr/bin/env bash
# scripts/test.sh: run the whole test suite against a real PostgreSQL.
#
#   scripts/test.sh [go test flags and packages]
#
# Examples: scripts/test.sh            everything (what CI runs)
#           scripts/test.sh -short     skip the slow tests
#           scripts/test.sh -run TestSeal ./seal/ ./config/
#
# Steps: find or start PostgreSQL (scripts/postgres.sh; DATABASE_URL is exported pointing at the
# server's admin database `postgres`, from which each test creates its own database), install
# Debian's chromium when the suite drives a browser and none is installed, check gofmt, run
# go vet, run golangci-lint (scripts/lint.sh, .golangci.yml), run go test -count=1 -timeout 14m
# with the race detector (see "Race detector" below), and print a summary. Every step runs even when an
# earlier one fails; the exit status is non-zero if any failed. Needs no standard input; works
# as root. Arguments starting with ./ ../ or the module path choose packages (default ./...);
# all others go to go test.
#
# Environment: SWITCHYARD_PG_KEEP=1 keeps a private PostgreSQL cluster this script started
# running afterwards (it is stopped by default; `bash scripts/postgres.sh stop` stops it later).
# SWITCHYARD_TEST_BROWSER=0 never installs a browser, =1 always does. SWITCHYARD_TEST_RACE=all
# runs every package under the race detector, =0 none (default: all but the packages in
# no_race_pkgs below). SWITCHYARD_TEST_LINT=0 skips golangci-lint. See scripts/postgres.sh for
# the SWITCHYARD_PG_* variables that choose the server.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

case "${1:-}" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
esac

say() { printf '\ntest.sh: %s\n' "$*" >&2; }
started=$(date +%s)

# Go: the one at /usr/local/go is used when none is on PATH.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  say "Go is not installed (or not on PATH). Install Go $(sed -n 's/^go //p' go.mod) or later from https://go.dev/dl/ and run again."
  exit 1
fi
want_go=$(sed -n 's/^go \([0-9]*\.[0-9]*\).*/\1/p' go.mod)
have_go=$(go env GOVERSION | sed -n 's/^go\([0-9]*\.[0-9]*\).*/\1/p')
if [ -n "$want_go" ] && [ -n "$have_go" ] &&
  [ "$(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -n 1)" != "$want_go" ]; then
  say "go.mod needs Go $want_go or later; $(command -v go) is $(go env GOVERSION)."
  exit 1
fi

# Packages and go test flags.
pkgs=()
flags=()
module=$(sed -n 's/^module //p' go.mod)
for arg in "$@"; do
  case "$arg" in
    ./* | ../* | . | "$module" | "$module"/*) pkgs+=("$arg") ;;
    *) flags+=("$arg") ;;
  esac
done
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

# PostgreSQL.
export SWITCHYARD_PG_FAST="${SWITCHYARD_PG_FAST:-1}" # a private cluster for tests need not survive a crash
# shellcheck source=scripts/postgres.sh
if ! source scripts/postgres.sh; then
  say "no PostgreSQL server is available (see the messages above); the tests need one."
  exit 1
fi
export DATABASE_URL="$SWITCHYARD_PG_ADMIN_URL"
if [ "${SWITCHYARD_PG_STARTED:-0}" = 1 ] && [ "${SWITCHYARD_PG_KEEP:-0}" != 1 ]; then
  trap 'sypg_stop' EXIT
fi
# Test packages run in parallel and some start several serve processes, each with its own
# connections: PostgreSQL's default of 100 connections, on a server that other programs also
# use, can run out. Say so up front, since the failures it causes ("too many clients") look
# like bugs in whatever test hit them. (A private cluster is created with 300.)
max_conns=$("$(_sypg_client psql)" -w -X -A -t -q -d "$DATABASE_URL" -c 'show max_connections' </dev/null 2>/dev/null || true)
# The two sets below run side by side: the plain one (the black-box tests, which mostly wait on
# the serve processes they start, at about 5 % of the CPU) would otherwise add its minutes to the raced one's.
# Side by side they peaked at 46 to 51 client connections (three runs sampled every 0.1 s, 11-27), so they run
# together on a server of PostgreSQL's default 100, leaving room for its other users; on a
# smaller server they run one after the other.
side_by_side=1
if [ -n "$max_conns" ] && [ "$max_conns" -lt 100 ] 2>/dev/null; then
  side_by_side=0
  say "NOTE: the PostgreSQL server allows only $max_conns connections (max_connections): the raced and the plain test packages run one after the other, not side by side. A server with 100 or more runs them together, in less time."
fi

# Browser, for the suite's browser tests: Debian's chromium, installed when the module uses a
# browser driver and no browser is found. A failed install only warns: those tests then say why.
needs_browser=0
case "${SWITCHYARD_TEST_BROWSER:-auto}" in
  1 | true | yes) needs_browser=1 ;;
  0 | false | no) needs_browser=0 ;;
  *) if grep -qE 'chromedp/chromedp|go-rod/rod|playwright-community/playwright-go|tebeka/selenium' go.mod; then needs_browser=1; fi ;;
esac
if [ "$needs_browser" = 1 ] && ! command -v chromium >/dev/null 2>&1 &&
  ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
  say "installing Debian's chromium for the browser tests"
  sudo=()
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n); fi
  if ! command -v apt-get >/dev/null 2>&1 ||
    ! { [ "$(id -u)" = 0 ] || [ ${#sudo[@]} -gt 0 ]; } ||
    ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >&2 ||
    ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium </dev/null >&2; then
    say "WARNING: could not install chromium (needs apt-get and root); browser tests will fail or skip. Install it with: apt-get install -y chromium"
  fi
fi

# Checks. Each records its result; all run.
results=()
failed=0
record() { # record NAME STATUS
  if [ "$2" = 0 ]; then results+=("PASS  $1"); else results+=("FAIL  $1"); failed=1; fi
}

mkdir -p artifacts
say "gofmt -l"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t gofiles < <(git ls-files --cached --others --exclude-standard -- '*.go' | while read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done)
else
  mapfile -t gofiles < <(find . -name '*.go' -not -path './.data/*' -not -path './.git/*' -not -path '*/testdata/*')
fi
unformatted=""
if [ ${#gofiles[@]} -gt 0 ]; then
  unformatted=$(gofmt -l "${gofiles[@]}") || unformatted="(gofmt failed)"
fi
if [ -n "$unformatted" ]; then
  printf 'not gofmt-formatted (run gofmt -w on them):\n%s\n' "$unformatted" >&2
  record "gofmt" 1
else
  record "gofmt" 0
fi

say "go vet ${pkgs[*]}"
set +e
go vet "${pkgs[@]}"
record "go vet" $?
set -e

# golangci-lint (scripts/lint.sh builds the pinned version once into a cache directory).
if [ "${SWITCHYARD_TEST_LINT:-1}" != 0 ]; then
  say "golangci-lint ${pkgs[*]}"
  set +e
  bash scripts/lint.sh "${pkgs[@]}"
  record "golangci-lint" $?
  set -e
fi

# Race detector: every package runs under -race except no_race_pkgs, the black-box tests that
# build the real binary and drive it over HTTP. Their goroutines live in the serve processes
# they start, which -race on the test does not instrument, while instrumenting the test binary
# would double the suite's longest package; the code those processes run is raced in its own
# packages (httpapi, identity, reactors, projections, commands). The two sets run side by side
# when the server has room for both (above), else one after the other.
no_race_pkgs=("$module/cmd/switchyard")
race_mode="${SWITCHYARD_TEST_RACE:-auto}"
for f in "${flags[@]}"; do case "$f" in -race | -race=true) race_mode=all ;; esac; done
mapfile -t all_pkgs < <(go list "${pkgs[@]}")
race_list=()
plain_list=()
for p in "${all_pkgs[@]}"; do
  skip=0
  case "$race_mode" in
    0 | false | no | off) skip=1 ;;
    all | 1 | true | yes) skip=0 ;;
    *) for n in "${no_race_pkgs[@]}"; do [ "$p" = "$n" ] && skip=1; done ;;
  esac
  if [ "$skip" = 1 ]; then plain_list+=("$p"); else race_list+=("$p"); fi
done
race_flags=()
for f in "${flags[@]}"; do case "$f" in -race | -race=true) ;; *) race_flags+=("$f") ;; esac; done

log=artifacts/go-test.log
say "go test -count=1 -timeout 14m ${flags[*]:-}: ${#race_list[@]} packages with -race, ${#plain_list[@]} without (output also in $log)"
set +e
race_status=0
plain_status=0
: >"$log.race"
: >"$log.plain"
if [ ${#plain_list[@]} -gt 0 ] && [ "$side_by_side" = 1 ]; then
  go test "${plain_list[@]}" -count=1 -timeout 14m "${race_flags[@]}" >"$log.plain" 2>&1 &
  plain_pid=$!
fi
if [ ${#race_list[@]} -gt 0 ]; then
  go test -race "${race_list[@]}" -count=1 -timeout 14m "${race_flags[@]}" 2>&1 | tee "$log.race"
  race_status=${PIPESTATUS[0]}
fi
if [ ${#plain_list[@]} -gt 0 ]; then
  if [ "$side_by_side" = 1 ]; then
    wait "$plain_pid"
    plain_status=$?
  else
    go test "${plain_list[@]}" -count=1 -timeout 14m "${race_flags[@]}" >"$log.plain" 2>&1
    plain_status=$?
  fi
  cat "$log.plain"
fi
cat "$log.race" "$log.plain" >"$log"
rm -f "$log.race" "$log.plain"
test_status=$((race_status != 0 || plain_status != 0))
set -e
record "go test" "$test_status"

# Summary.
ok_pkgs=$(grep -cE '^ok[[:space:]]' "$log" || true)
failed_pkgs=$(grep -E '^FAIL[[:space:]]+[^[:space:]]' "$log" | awk '{print $2}' | sort -u || true)
failed_tests=$(grep -E '^[[:space:]]*--- FAIL: ' "$log" | sed -E 's/^[[:space:]]*--- FAIL: ([^ ]+).*/\1/' || true)
elapsed=$(($(date +%s) - started))

printf '\n==== test summary (%dm%02ds, PostgreSQL: %s) ====\n' $((elapsed / 60)) $((elapsed % 60)) "${SWITCHYARD_PG_SOURCE:-?}"
printf '%s\n' "${results[@]}"
printf 'packages ok: %s, failed: %s\n' "$ok_pkgs" "$(printf '%s' "$failed_pkgs" | grep -c . || true)"
if [ -n "$failed_pkgs" ]; then
  printf 'failed packages:\n'
  printf '%s\n' "$failed_pkgs" | sed 's/^/  /'
fi
if [ -n "$failed_tests" ]; then
  printf 'failed tests:\n'
  printf '%s\n' "$failed_tests" | head -n 50 | sed 's/^/  /'
fi
if [ "$failed" != 0 ]; then
  printf 'RESULT: FAIL\n'
  exit 1
fi
printf 'RESULT: PASS\n'

#!/usr/bin/env bash
# scripts/run.sh: build and run Switchyard on this machine.
#
#   scripts/run.sh [serve flags]
#
# Steps: find or start PostgreSQL (scripts/postgres.sh), create the database if it does not exist
# (`switchyard`, or the one named in DATABASE_URL when you set it), record the choice in
# .data/database.env so that every later start and bin/switchyard use the same database until
# `bash scripts/postgres.sh forget` (a DATABASE_URL you set wins and is not recorded), build
# ./cmd/switchyard into bin/switchyard, run `bin/switchyard migrate`, on the first start create an admin user and a
# workspace and print the admin's password and API key once, then exec `bin/switchyard serve`
# with the arguments given. Configuration is read from the environment (docs/configuration.md);
# without SWITCHYARD_SECRET_KEY the service generates a key in ./data and warns once.
#
# Each step is named before it runs. The first build compiles every dependency (about a minute);
# while it builds the script says so every 15 s (SWITCHYARD_RUN_STILL_EVERY seconds, for tests).
#
# A private PostgreSQL cluster started for this keeps running after the service stops; stop it
# with `bash scripts/postgres.sh stop`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

case "${1:-}" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
esac

say() { printf 'run.sh: %s\n' "$*" >&2; }

# Go: the one at /usr/local/go is used when none is on PATH.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  say "Go is not installed (or not on PATH). Install Go $(sed -n 's/^go //p' go.mod) or later from https://go.dev/dl/ and run again."
  exit 1
fi

# PostgreSQL, and the service's database on it: DATABASE_URL if set, else the database recorded
# for this checkout by its first start (.data/database.env), else a new choice, then recorded.
# shellcheck source=scripts/postgres.sh
if ! source scripts/postgres.sh app; then
  say "no PostgreSQL database is available (see the messages above)."
  exit 1
fi

# still WHAT: says every 15 s that WHAT goes on, until killed: a first build is a minute of
# compiling with nothing to show.
still() {
  local began=$SECONDS pid=""
  trap 'kill "$pid" 2>/dev/null; exit 0' TERM
  while :; do
    # Its own output to /dev/null: a sleep left behind must not hold the script's output open.
    sleep "${SWITCHYARD_RUN_STILL_EVERY:-15}" </dev/null >/dev/null 2>&1 &
    pid=$!
    wait "$pid"
    say "still $1 ($((SECONDS - began)) s so far)"
  done
}

# Build.
began=$SECONDS
if [ -x bin/switchyard ]; then
  say "building bin/switchyard (only what changed is compiled again)"
else
  say "building bin/switchyard: the first build compiles every dependency, about a minute; later starts take seconds"
fi
mkdir -p bin
still building &
ticker=$!
built=0
go build -o bin/switchyard ./cmd/switchyard || built=$?
kill "$ticker" 2>/dev/null || true
wait "$ticker" 2>/dev/null || true
if [ "$built" != 0 ]; then
  say "the build failed (see above)"
  exit "$built"
fi
say "built bin/switchyard in $((SECONDS - began)) s"

say "migrating $(_sypg_redact "$DATABASE_URL") (creates or updates the schema)"
bin/switchyard migrate
say "creating the admin user and a first workspace, unless a workspace exists"

# First start: an admin user and a workspace (the command does nothing when a workspace exists).
password=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
if bootstrap=$(bin/switchyard admin bootstrap --if-empty --email admin@localhost --password "$password" \
  --workspace default --credits 1000 --json </dev/null); then
  if [ -n "$bootstrap" ] && ! printf '%s' "$bootstrap" | grep -qE '"(skipped|existing)"[[:space:]]*:[[:space:]]*true|"created"[[:space:]]*:[[:space:]]*false'; then
    cat <<EOF

================================================================================
 FIRST START: an admin user and a workspace were created. This is shown ONCE;
 keep the API key's secret now, it cannot be recovered.

 Sign-in:  admin@localhost / $password   (staff: may review apps at /review)

$bootstrap
================================================================================

EOF
  fi
else
  say "WARNING: 'switchyard admin bootstrap' failed (see above); the service starts anyway. Create a user and workspace with 'bin/switchyard admin ...'."
fi

if [ "${SWITCHYARD_PG_SOURCE:-}" = private ]; then
  say "PostgreSQL runs as a private cluster; after stopping the service, stop it with: bash scripts/postgres.sh stop"
fi
say "starting: bin/switchyard serve${*:+ $*} (it logs \"switchyard listening\" once it answers)"
exec bin/switchyard serve "$@"
